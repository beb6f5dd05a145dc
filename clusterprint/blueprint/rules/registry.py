"""The list of rules and the decorator that adds to it."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from clusterprint.blueprint.findings import Finding
from clusterprint.blueprint.model import Blueprint

RuleFunction = Callable[[Blueprint], Iterable[Finding]]


@dataclass(frozen=True)
class Rule:
    """A rule id and the function that checks it: the id is what users suppress or grep."""

    id: str
    function: RuleFunction

    def check(self, blueprint: Blueprint) -> list[Finding]:
        """The rule's findings, each stamped with the rule's id."""
        return [replace(f, rule=self.id) for f in self.function(blueprint)]


RULES: list[Rule] = []


def rule(rule_id: str) -> Callable[[RuleFunction], RuleFunction]:
    """Register a rule function under a stable id."""

    def register(function: RuleFunction) -> RuleFunction:
        RULES.append(Rule(rule_id, function))
        return function

    return register
