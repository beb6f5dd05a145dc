"""How a diff reads: a changed script shows its changed line, not two truncated copies."""

from clusterprint.preview.diff import InputChange, PlanDiff, ResourceChange
from clusterprint.preview.diff_report import markdown_report, text_report

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
