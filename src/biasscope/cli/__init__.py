"""The command line: one small module per command, each over one library call."""
