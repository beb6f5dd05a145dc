"""The blueprint: its model, how a file is read and checked, and what the checks say.

Model, loader, findings, the rules a schema cannot say, the generated JSON Schema and the
GPU fabric a blueprint needs. Imports ``contract`` and ``facts``, never rendering or Pulumi.
"""
