"""How a diff reads: a changed script shows its changed line and a changed Slurm file its
unified diff, not two truncated copies."""

import json

from clusterprint.preview.diff import InputChange, PlanDiff, ResourceChange
from clusterprint.preview.diff_report import markdown_report, text_report
from clusterprint.preview.file_diff import slurm_file_diffs

OLD = "#!/bin/bash\nset -eu\nMaxNodeCount=16\necho done\n"
NEW = "#!/bin/bash\nset -eu\nMaxNodeCount=32\necho done\nexit 0\n"


def script_change(old: str, new: str) -> PlanDiff:
    change = ResourceChange("update", "gcp:compute/instance:Instance", "c-controller-vm",
                            [InputChange("metadata.startup-script", old, new, False)])
    return PlanDiff([change])


def test_a_changed_script_shows_its_first_changed_line_and_how_many_more():
    text = text_report(script_change(OLD, NEW), "old.yaml", "new.yaml", False)
    assert ('metadata.startup-script: line 3: "MaxNodeCount=16" -> "MaxNodeCount=32" '
            "(and 1 more changed line)") in text


def test_markdown_shows_the_same_line():
    text = markdown_report(script_change(OLD, NEW), "old.yaml", "new.yaml", False)
    assert '"MaxNodeCount=16" -> "MaxNodeCount=32"' in text


def test_short_values_show_in_full():
    diff = PlanDiff([ResourceChange("update", "t", "n", [InputChange("size", 16, 32, False)])])
    assert "size: 16 -> 32" in text_report(diff, "a", "b", False)


SLURM_CONFIG = "metadata.clusterprint-slurm-config"


def files_change(old: dict | str | None, new: dict | str | None) -> PlanDiff:
    """A controller whose Slurm files' metadata changes from ``old`` to ``new``."""
    def value(files):
        return files if files is None or isinstance(files, str) else json.dumps(files)

    before, after = value(old), value(new)
    change = ResourceChange("update", "gcp:compute/instance:Instance", "c-controller-vm",
                            [InputChange(SLURM_CONFIG, before, after, False,
                                         slurm_file_diffs(SLURM_CONFIG, before, after))])
    return PlanDiff([change])


CONF = "ClusterName=c\nPartitionName=debug MaxTime=1:00:00\nNodeName=n1\n"


def test_a_changed_slurm_file_is_a_unified_diff_of_that_file_by_name():
    text = text_report(files_change({"slurm.conf": CONF, "gres.conf": "x\n"},
                                    {"slurm.conf": CONF.replace("1:00", "4:00"),
                                     "gres.conf": "x\n"}), "a", "b", False)
    assert f"{SLURM_CONFIG}: Slurm files changed: slurm.conf\n" in text
    assert ("        --- a/slurm.conf\n        +++ b/slurm.conf\n        @@ -1,3 +1,3 @@\n"
            "         ClusterName=c\n"
            "        -PartitionName=debug MaxTime=1:00:00\n"
            "        +PartitionName=debug MaxTime=4:00:00\n") in text
    assert "gres.conf" not in text and "chars)" not in text


def test_a_file_that_appears_is_diffed_from_dev_null():
    (file,) = files_change({"slurm.conf": CONF},
                           {"slurm.conf": CONF, "topology.yaml": "- topology: t\n"}
                           ).changes[0].inputs[0].files
    assert file.name == "topology.yaml"
    assert file.lines[:2] == ("--- /dev/null", "+++ b/topology.yaml")


def test_markdown_puts_each_file_in_a_diff_block_no_backtick_in_it_can_end():
    new = CONF + "# ```` a fence in a comment\n"
    text = markdown_report(files_change({"slurm.conf": CONF}, {"slurm.conf": new}),
                           "a", "b", False)
    assert "Slurm files changed: slurm.conf" in text.split("#### Slurm files")[0]
    block = text.split("`c-controller-vm`:\n\n", 1)[1]
    assert block.startswith("`````diff\n--- a/slurm.conf\n")
    assert "+# ```` a fence in a comment\n`````\n" in block


def test_a_value_that_is_not_a_bundle_of_files_shows_as_values():
    text = text_report(files_change("not json", {"slurm.conf": CONF}), "a", "b", False)
    assert f'{SLURM_CONFIG}: "not json" -> ' in text and "+++" not in text
