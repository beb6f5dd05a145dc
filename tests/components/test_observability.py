"""Observability on its own."""

from __future__ import annotations

import json

from clusterprint.components.observability import Observability, dashboard_json

TENSORBOARD = "gcp:vertex/aiTensorboard:AiTensorboard"
DASHBOARD = "gcp:monitoring/dashboard:Dashboard"


def observability(cloud, **flags) -> None:
    cloud.run(lambda: Observability("obs", cluster="c1", project="p-roject",
                                    region="us-central1", **flags).tensorboard)


def test_nothing_unless_asked(cloud):
    observability(cloud)
    assert not cloud.of_type(TENSORBOARD) and not cloud.of_type(DASHBOARD)


def test_tensorboard_and_dashboard_when_asked(cloud):
    observability(cloud, tensorboard=True, dashboard=True)
    assert cloud.one(TENSORBOARD).inputs["region"] == "us-central1"
    assert cloud.one(DASHBOARD).inputs["dashboardJson"] == dashboard_json("c1")


def test_the_dashboard_charts_only_this_clusters_vms():
    dashboard = json.loads(dashboard_json("c1"))
    tiles = dashboard["mosaicLayout"]["tiles"]
    assert tiles and dashboard["displayName"] == "clusterprint c1"
    for tile in tiles:
        query = tile["widget"]["xyChart"]["dataSets"][0]["timeSeriesQuery"]
        assert 'metadata.user_labels."clusterprint-cluster"="c1"' in (
            query["timeSeriesFilter"]["filter"])
