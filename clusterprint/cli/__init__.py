"""The ``clusterprint`` command: its entry point, one module per command, the ``new`` wizard.

The top layer: it may import every layer below; nothing below imports it.
"""
