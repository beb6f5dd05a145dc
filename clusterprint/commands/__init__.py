"""One module per ``clusterprint`` command: ``add_arguments(parser)`` and ``run(args)``."""
