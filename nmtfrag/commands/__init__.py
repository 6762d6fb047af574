"""One module per `nmtfrag` subcommand: argument parsing only, work is in the stages."""
