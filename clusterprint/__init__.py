"""clusterprint: Slurm GPU training clusters on Google Cloud from one checked blueprint.

One folder per layer, each importing only its own and the layers below it (imports inside
functions too; tests/test_layers.py holds every module to it), from the bottom:

- ``node``: the standard-library programs shipped to the VMs; they import nothing of
  clusterprint but each other.
- ``facts``: dated facts about the world outside (machine families, zones, storage tiers,
  prices, GPU software, recipes, IAM roles, prerequisites), each with its source.
- ``contract``: what several layers must agree on: derived names, instance metadata keys.
- ``blueprint``: the model, loading and validation, findings, the rules, the schema and the
  GPU fabric a blueprint needs.
- ``render``: the files the nodes get (Slurm configs, boot scripts, jobs), from
  ``render/templates``.
- ``build``: the node images built on builder VMs through the Compute API, for
  ``clusterprint image build`` and ``pulumi up`` alike.
- ``components``: the Pulumi ComponentResources (the top-level ``components/`` folder,
  installed as ``clusterprint.components``).
- ``preview``: what ``pulumi up`` would do, offline: plan, summary and cost, diff,
  replacements, rollouts, policies.
- ``cli``: the ``clusterprint`` command.

Each layer is made from those below: the node programs run on VMs where nothing else of
clusterprint is installed, so they lean on no layer; facts and the contract are plain values
the model is written in; a blueprint is checked without rendering anything; rendering is
pure and knows no Pulumi; a build runs a rendered install script on a VM and keeps its disk;
the components turn rendered files (and built images) into resources; the preview runs the
components under Pulumi's mocks; the command line drives them all.
"""
