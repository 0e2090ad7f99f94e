"""The `specexec` command line: each subcommand module has add_arguments(parser) and run(args)."""
