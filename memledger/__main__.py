from memledger.cli import main

main()
