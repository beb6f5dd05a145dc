"""The Compute API client: what it asks again, what it reports, how it waits, over real HTTP."""

from __future__ import annotations

import pytest
from google.auth.transport.requests import AuthorizedSession
from google.oauth2.credentials import Credentials

from clusterprint.build import compute
from clusterprint.build.compute import ComputeApi, ComputeError, NoCredentials
from tests.support.image_compute_fake import PROJECT, TOKEN, ZONE


@pytest.fixture
def pauses() -> list[float]:
    return []


@pytest.fixture
def api(fake, pauses) -> ComputeApi:
    return ComputeApi(AuthorizedSession(Credentials(TOKEN)), PROJECT, fake.url,
                      sleep=pauses.append)


def test_a_missing_image_or_instance_is_none(api):
    assert api.image("nothing") is None
    assert api.instance(ZONE, "nothing") is None
    assert api.delete_instance(ZONE, "nothing") is None


def test_a_read_that_keeps_failing_is_asked_four_times_then_reported(api, fake, pauses):
    fake.refusals["GET nothing"] = (503, "backend unavailable")
    with pytest.raises(ComputeError) as error:
        api.image("nothing")
    assert error.value.status == 503
    assert str(error.value) == (f"GET {fake.url}/projects/{PROJECT}/global/images/nothing: "
                                "HTTP 503: backend unavailable")
    # a NoAnswer: the API's other calls would fail alike, so a caller may stop here
    assert isinstance(error.value, compute.NoAnswer)
    assert fake.verbs() == ["GET nothing"] * compute.ATTEMPTS
    assert pauses == [2.0, 4.0, 8.0]


def test_a_create_is_asked_once_whatever_the_answer(api, fake):
    fake.refusals["POST instances"] = (503, "backend unavailable")
    with pytest.raises(ComputeError) as error:
        api.insert_instance(ZONE, {"name": "vm"})
    assert fake.verbs() == ["POST instances"]
    assert not isinstance(error.value, compute.NoAnswer)  # asked once: says nothing of the API


def test_a_refusal_is_not_asked_again(api, fake):
    fake.refusals["GET nothing"] = (403, "Required 'compute.images.get' permission")
    with pytest.raises(ComputeError) as error:
        api.image("nothing")
    assert error.value.status == 403
    assert fake.verbs() == ["GET nothing"]


def test_an_answer_that_is_not_the_apis_shows_its_start(api, fake):
    fake.server.RequestHandlerClass.do_GET = lambda handler: (
        handler.send_response(400), handler.end_headers(),
        handler.wfile.write(b"<html>Bad Request</html>"))
    with pytest.raises(ComputeError) as error:
        api.image("nothing")
    assert str(error.value).endswith("HTTP 400: <html>Bad Request</html>")


@pytest.mark.parametrize("body", [b"<html>Sign in to the proxy</html>", b'{"items": [',
                                  b'["a list"]', b'"a string"'])
def test_a_success_whose_body_is_not_a_json_object_is_an_error_not_a_crash(api, fake, body):
    fake.server.RequestHandlerClass.do_GET = lambda handler: (
        handler.send_response(200), handler.send_header("Content-Length", str(len(body))),
        handler.end_headers(), handler.wfile.write(body))
    with pytest.raises(ComputeError) as error:
        api.image("nothing")
    assert error.value.status == 200
    assert str(error.value) == (f"GET {fake.url}/projects/{PROJECT}/global/images/nothing: "
                                f"HTTP 200 but not a JSON object: {body.decode()}")


def test_waiting_asks_the_operations_scope_until_done(api, fake):
    operation = api.insert_instance(ZONE, {"name": "vm", "disks": [
        {"autoDelete": True, "initializeParams": {"diskName": "vm"}}]})
    assert operation["status"] == "RUNNING"
    api.wait(operation, timeout_s=60)
    assert fake.calls[-1].path == (f"/compute/v1/projects/{PROJECT}/zones/{ZONE}/operations/"
                                   f"{operation['name']}/wait")


def test_an_operation_that_ends_in_errors_raises_them(api, fake):
    fake.operation_errors["instances.insert"] = "ZONE_RESOURCE_POOL_EXHAUSTED"
    operation = api.insert_instance(ZONE, {"name": "vm", "disks": [
        {"autoDelete": True, "initializeParams": {"diskName": "vm"}}]})
    with pytest.raises(ComputeError, match="FAKE: ZONE_RESOURCE_POOL_EXHAUSTED"):
        api.wait(operation, timeout_s=60)


def test_an_operation_not_done_in_time_raises():
    never = ComputeApi(session=None, project=PROJECT)  # no call is made: the time is up
    with pytest.raises(ComputeError, match=r"operation op-1 \(insert\) not done after 0s"):
        never.wait({"name": "op-1", "operationType": "insert", "status": "RUNNING"}, 0)


def test_without_credentials_the_error_says_how_to_get_them(monkeypatch, tmp_path):
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "none.json"))
    with pytest.raises(NoCredentials) as error:
        compute.authorized_session()
    # Each command adds its own way out (image build: --dry-run) after it.
    assert str(error.value).endswith("run `gcloud auth application-default login`")


def test_credentials_refused_mid_build_are_one_clear_error():
    from google.auth.exceptions import RefreshError

    class Expired:
        def request(self, method, url, **kwargs):
            raise RefreshError("Reauthentication is needed. Please run `gcloud auth "
                               "application-default login` to reauthenticate.")

    with pytest.raises(ComputeError, match="the credentials were refused: Reauthentication is "
                                           "needed"):
        ComputeApi(Expired(), PROJECT).image("any")


@pytest.mark.parametrize(("value", "number"), [
    (5, 5.0), ("16", 16.0), ("2.5", 2.5), (-1, -1.0),
    ("NaN", None), ("Infinity", None), ("lots", None), (None, None), (True, None), ([1], None)])
def test_a_figure_of_an_answer_is_a_finite_number_or_none(value, number):
    assert compute.number_of(value) == number
