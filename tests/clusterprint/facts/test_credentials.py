"""facts.credentials: where in a value a credential is, for the policies and validate alike."""

from clusterprint.facts import credentials

TOKEN = "pul-" + "0123456789abcdef" * 2 + "01234567"


def test_leaks_name_the_path_of_a_value_a_key_and_a_munge_named_key():
    value = {"labels": {"team": TOKEN, TOKEN: "x", "munge-key": "abc"},
             "items": [{"metadata": {"munge_key": "projects/p/secrets/s"}}]}
    assert list(credentials.leaks(value)) == [
        (("labels", "team"), "holds a Pulumi access token"),
        (("labels", TOKEN), "holds a Pulumi access token"),
        (("labels", "munge-key"),
         "is named as the munge key but holds a value, not a secret's name")]


def test_a_path_reads_as_keys_with_dots_and_indexes_in_brackets():
    assert credentials.dotted(("networkInterfaces", 0, "accessConfigs")) == (
        "networkInterfaces[0].accessConfigs")
    assert credentials.dotted(()) == ""
