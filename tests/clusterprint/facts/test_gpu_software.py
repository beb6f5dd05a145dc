"""The fabric tables cover every GPU family the catalog knows, and fetch only what is signed."""

from __future__ import annotations

import pytest

from clusterprint.facts import gpu_software, machines


def test_every_gpu_networking_kind_of_the_catalog_has_its_fabric_software():
    kinds = {f.networking for f in machines.GPU_MACHINES.values()} - {"none"}
    assert kinds == set(gpu_software.FABRIC)
    assert all(gpu_software.FABRIC[k].networking == k for k in kinds)


SOURCES = sorted({s for f in gpu_software.FABRIC.values()
                  for s in (*(p.source for p in f.apt), f.dmabuf and f.dmabuf.source) if s}
                 | {gpu_software.AR_TRANSPORT}, key=lambda s: s.name)


@pytest.mark.parametrize("source", SOURCES, ids=lambda s: s.name)
def test_every_repository_is_fetched_over_tls_and_signed_by_a_key_over_tls(source):
    assert source.line.startswith(("https://", "ar+https://"))
    assert source.key_url.startswith("https://")
    assert "trusted=yes" not in source.line


def test_every_rxdm_waits_for_a_ready_line_within_a_bounded_budget():
    waits = [f.rxdm for f in gpu_software.FABRIC.values() if f.rxdm]
    assert waits and all(w.ready_line and 0 < w.budget_s <= 600 for w in waits)
