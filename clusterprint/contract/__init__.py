"""What several layers must agree on, in one place: derived names and instance metadata keys.

The rules and the components derive the same names, the components write the metadata keys
the node scripts read; each value is defined here once. Imports only ``facts``.
"""
