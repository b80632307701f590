"""The `memledger` command line: assembles each layer's commands into one group."""
