from memtape.cli import main

main()
