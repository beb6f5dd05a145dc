"""The Service Usage and Resource Manager calls ``clusterprint preflight`` makes.

REST over the same authorized session as the Compute calls (clusterprint/build/compute.py
says why not Google's generated clients). Each base URL can be another endpoint through an
environment variable, as CLUSTERPRINT_COMPUTE_API is for Compute, so tests point the command
at local fakes. Shapes: cloud.google.com/service-usage/docs/reference/rest/v1/services/
batchGet and cloud.google.com/resource-manager/reference/rest/v1/projects/testIamPermissions
and .../v1/projects/get.
"""

from __future__ import annotations

import os
from typing import Any

from clusterprint.build.compute import RestApi

#: Google's endpoint of the Service Usage API, and the variable naming another.
SERVICE_USAGE_URL = "https://serviceusage.googleapis.com/v1"
SERVICE_USAGE_VARIABLE = "CLUSTERPRINT_SERVICE_USAGE_API"
#: Google's endpoint of the Resource Manager API, and the variable naming another.
RESOURCE_MANAGER_URL = "https://cloudresourcemanager.googleapis.com/v1"
RESOURCE_MANAGER_VARIABLE = "CLUSTERPRINT_RESOURCE_MANAGER_API"
#: services.batchGet takes at most 30 names a call.
BATCH_GET_NAMES_MAX = 30


def service_usage_url() -> str:
    """The Service Usage endpoint: ``CLUSTERPRINT_SERVICE_USAGE_API`` when set, else Google's."""
    return os.environ.get(SERVICE_USAGE_VARIABLE) or SERVICE_USAGE_URL


def resource_manager_url() -> str:
    """The Resource Manager endpoint: ``CLUSTERPRINT_RESOURCE_MANAGER_API`` when set, else
    Google's."""
    return os.environ.get(RESOURCE_MANAGER_VARIABLE) or RESOURCE_MANAGER_URL


class ServiceUsageApi(RestApi):
    """Which APIs a project has enabled."""

    def states(self, apis: list[str]) -> dict[str, str]:
        """Each API's state in the project (ENABLED or DISABLED), by its name."""
        found: dict[str, str] = {}
        for start in range(0, len(apis), BATCH_GET_NAMES_MAX):
            names = [f"projects/{self.project}/services/{api}"
                     for api in apis[start:start + BATCH_GET_NAMES_MAX]]
            answer = self._required("GET", "services:batchGet", params={"names": names})
            for service in _listed(answer, "services"):
                if isinstance(service, dict):
                    found[str(service.get("name", "")).rsplit("/", 1)[-1]] = str(
                        service.get("state", ""))
        return found


class ResourceManagerApi(RestApi):
    """Whether the caller sees a project, and what it may do there."""

    def project_info(self) -> dict[str, Any]:
        """The project (projects.get, which needs resourcemanager.projects.get on it)."""
        return self._required("GET", "")

    def held_permissions(self, permissions: list[str]) -> set[str]:
        """Those of ``permissions`` the caller holds on the project, however granted."""
        answer: dict[str, Any] = self._required(
            "POST", ":testIamPermissions", body={"permissions": permissions})
        return {p for p in _listed(answer, "permissions") if isinstance(p, str)}


def _listed(answer: dict[str, Any], key: str) -> list[Any]:
    """The list an answer holds at ``key``; none where it holds something else, so an answer
    of the wrong shape reads as nothing enabled or held (a problem line, never a pass)."""
    value = answer.get(key)
    return value if isinstance(value, list) else []
