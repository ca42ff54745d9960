"""The last run's outputs found by artifact name on GitHub, downloaded and unpacked: against a loopback stand-in."""

from __future__ import annotations

import json
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from github_artifacts import REPO, TOKEN, GitHubArtifacts, StoredArtifact, zip_of
from web_stub import running_stub

from ci.github.api import WebError, download, get_json_pages
from ci.maintain.artifacts import ArchiveError, FetchedRun, fetch_last_run, unpack_zip

RECORD = json.dumps({"exit_status": 0, "blocks": [], "guides": []}).encode()


def outputs_zip(marker: str) -> bytes:
    """What guide-run.yml uploads: the report directory, JUnit beside the run's outputs."""
    return zip_of(
        {"junit.xml": b"<testsuites/>", "outputs/results.json": RECORD, "outputs/marker.txt": marker.encode()}
    )


def when(day: int, hour: int = 18) -> str:
    return f"2026-04-{day:02d}T{hour:02d}:00:00Z"


@pytest.fixture
def github(monkeypatch: pytest.MonkeyPatch) -> Iterator[GitHubArtifacts]:
    with running_stub() as api, running_stub() as storage:
        monkeypatch.setenv("GITHUB_API_URL", api.url)
        monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
        monkeypatch.delenv("GH_TOKEN", raising=False)
        monkeypatch.setenv("GUIDE_GUARD_HTTP_TIMEOUT", "5")
        yield GitHubArtifacts(api, storage)


def fetch(tmp_path: Path, **limits: int) -> FetchedRun:
    return fetch_last_run(REPO, "specforge-npu", tmp_path / "fetched", **limits)


def marker(fetched: FetchedRun) -> str:
    assert fetched.directory is not None, fetched.message
    assert (fetched.directory / "results.json").read_bytes() == RECORD
    return (fetched.directory / "marker.txt").read_text()


def test_the_newest_run_with_outputs_is_found_however_many_nights_were_skipped(
    github: GitHubArtifacts, tmp_path: Path
) -> None:
    github.add(StoredArtifact(1, "specforge-npu-attempt-1", 80, "main", when(1), outputs_zip("run 80")))
    github.add(StoredArtifact(2, "specforge-npu-attempt-1", 90, "main", when(2), outputs_zip("run 90")))
    github.add(StoredArtifact(3, "specforge-npu-attempt-1", 100, "main", when(3), outputs_zip("run 100, attempt 1")))
    github.add(StoredArtifact(4, "specforge-npu-attempt-2", 100, "main", when(3, 23), outputs_zip("run 100, again")))
    # fifteen nights the monitor skipped (no artifact), while other workflows uploaded plenty
    for number in range(15):
        github.add(StoredArtifact(10 + number, "coverage", 101 + number, "main", when(4 + number), zip_of({})))

    fetched = fetch(tmp_path)

    assert marker(fetched) == "run 100, again"  # the newest attempt of the newest run that has outputs
    assert not fetched.failed
    assert fetched.message.startswith("artifact specforge-npu-attempt-2 of run 100 on main (")
    asked = [path for path in github.api.paths() if "/actions/artifacts?" in path]
    assert [path.split("name=")[1].split("&")[0] for path in asked] == [
        "specforge-npu-attempt-1",
        "specforge-npu-attempt-2",
        "specforge-npu-attempt-3",  # no artifact has this name: no higher attempt is asked for
    ]
    assert all("per_page=100" in path for path in asked)


def test_expired_artifacts_forks_and_other_branches_are_passed_over_across_pages(
    github: GitHubArtifacts, tmp_path: Path
) -> None:
    github.add(StoredArtifact(1, "specforge-npu-attempt-1", 10, "main", when(1), outputs_zip("the main run")))
    github.add(StoredArtifact(2, "specforge-npu-attempt-1", 11, "main", when(2), outputs_zip("expired"), expired=True))
    fork = StoredArtifact(3, "specforge-npu-attempt-1", 12, "main", when(3), outputs_zip("a fork's main"))
    fork.head_repository_id = 777
    github.add(fork)
    # more dispatched runs on other branches than one page holds: the main run is on the second page
    for number in range(101):
        github.add(StoredArtifact(100 + number, "specforge-npu-attempt-1", 20 + number, "try-a-fix", when(5), b"x"))

    fetched = fetch(tmp_path)

    assert marker(fetched) == "the main run"
    # the second page is asked where GitHub's Link header points, not rebuilt from the first request
    assert any(path.startswith("/repositories/4242/actions/artifacts?") for path in github.api.paths())
    assert [p.split("?")[0] for p in github.storage.paths()] == ["/blob/1.zip"]  # nothing else downloaded


def test_with_no_run_on_the_default_branch_the_newest_elsewhere_is_taken_and_named(
    github: GitHubArtifacts, tmp_path: Path
) -> None:
    github.add(StoredArtifact(1, "specforge-npu-attempt-1", 10, "try-a-fix", when(1), outputs_zip("older")))
    github.add(StoredArtifact(2, "specforge-npu-attempt-1", 11, "try-again", when(2), outputs_zip("newer")))

    fetched = fetch(tmp_path)

    assert marker(fetched) == "newer"
    assert "of run 11 on try-again" in fetched.message
    assert "none is on main" in fetched.message


def test_no_artifact_at_all_is_a_notice_not_a_failure(github: GitHubArtifacts, tmp_path: Path) -> None:
    github.add(StoredArtifact(1, "coverage", 10, "main", when(1), zip_of({})))
    fetched = fetch(tmp_path)
    assert fetched.directory is None and not fetched.failed
    assert fetched.message == f"{REPO} has no artifact named specforge-npu-attempt-1"

    github.add(StoredArtifact(2, "specforge-npu-attempt-1", 11, "main", when(2), b"x", expired=True))
    github.add(StoredArtifact(3, "specforge-npu-attempt-1", 12, "main", when(3), b"x", expired=True))
    fetched = fetch(tmp_path)
    assert fetched.directory is None and not fetched.failed
    assert fetched.message == (
        f"{REPO} has no unexpired artifact named specforge-npu-attempt-1 ... specforge-npu-attempt-2 "
        "(2 listed, 2 expired)"
    )
    assert github.storage.paths() == []


def test_the_token_goes_to_the_api_and_never_to_the_storage(github: GitHubArtifacts, tmp_path: Path) -> None:
    github.add(StoredArtifact(7, "specforge-npu-attempt-1", 10, "main", when(1), outputs_zip("downloaded")))

    assert marker(fetch(tmp_path)) == "downloaded"

    [(api_path, api_headers)] = [(p, h) for p, h in github.api.requests if p.endswith("/zip")]
    assert api_path == f"/repos/{REPO}/actions/artifacts/7/zip"
    assert api_headers["Authorization"] == f"Bearer {TOKEN}"
    [(storage_path, storage_headers)] = github.storage.requests
    assert storage_path.startswith("/blob/7.zip?sig=")
    assert "authorization" not in {name.lower() for name in storage_headers}, storage_headers


def test_a_zip_that_would_write_outside_its_directory_is_refused(github: GitHubArtifacts, tmp_path: Path) -> None:
    planted = {"outputs/results.json": RECORD, "../../planted.txt": b"owned"}
    github.add(StoredArtifact(1, "specforge-npu-attempt-1", 10, "main", when(1), zip_of(planted)))

    fetched = fetch(tmp_path)

    assert fetched.directory is None and fetched.failed
    assert "would write outside its directory ('../../planted.txt')" in fetched.message
    assert list(tmp_path.rglob("planted.txt")) == [] and not (tmp_path.parent / "planted.txt").exists()
    assert list((tmp_path / "fetched").iterdir()) == []  # the zip and the half-made directory are gone


@pytest.mark.parametrize("name", ["../x", "outputs/../../x", "/etc/x", "C:/x", "C:x", "outputs\\..\\..\\x"])
def test_unsafe_member_names_refuse_the_whole_archive(tmp_path: Path, name: str) -> None:
    archive = tmp_path / "a.zip"
    with zipfile.ZipFile(archive, "w") as bundle:
        bundle.writestr("outputs/results.json", RECORD)
        bundle.writestr(zipfile.ZipInfo(name), b"x")  # ZipInfo keeps the name as given; writestr(str) would not
    with pytest.raises(ArchiveError, match="would write outside its directory"):
        unpack_zip(archive, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_unpacking_stops_at_the_size_limit_and_leaves_nothing(tmp_path: Path) -> None:
    archive = tmp_path / "bomb.zip"
    archive.write_bytes(zip_of({"outputs/results.json": RECORD, "outputs/zeros": bytes(50_000)}))
    assert archive.stat().st_size < 2_000  # it compresses to almost nothing
    with pytest.raises(ArchiveError, match="more than the 10000 allowed"):
        unpack_zip(archive, tmp_path / "out", limit_bytes=10_000)
    assert not (tmp_path / "out").exists()
    unpacked = unpack_zip(archive, tmp_path / "fine", limit_bytes=60_000)
    assert (unpacked / "outputs" / "zeros").stat().st_size == 50_000


def test_a_zip_that_is_no_zip_is_refused(github: GitHubArtifacts, tmp_path: Path) -> None:
    github.add(StoredArtifact(1, "specforge-npu-attempt-1", 10, "main", when(1), b"<html>not a zip</html>"))
    fetched = fetch(tmp_path)
    assert fetched.failed and "1.zip is not a readable zip" in fetched.message


def test_an_artifact_larger_than_the_download_limit_is_not_downloaded(github: GitHubArtifacts, tmp_path: Path) -> None:
    github.add(StoredArtifact(1, "specforge-npu-attempt-1", 10, "main", when(1), outputs_zip("big")))
    fetched = fetch(tmp_path, download_limit_bytes=100)
    assert fetched.failed and "more than the 100 downloaded" in fetched.message
    assert github.storage.paths() == []


def test_a_download_that_grows_past_its_limit_is_cut_and_removed(tmp_path: Path) -> None:
    with running_stub() as server:
        server.set("/big", bytes(5_000))
        server.set("/unannounced", bytes(5_000), announce_length=False)
        with pytest.raises(WebError, match="holds 5000 bytes, more than the 1000 allowed"):
            download(f"{server.url}/big", tmp_path / "big", service="stub", limit_bytes=1000)
        assert not (tmp_path / "big").exists()
        with pytest.raises(WebError, match="holds more than the 1000 bytes allowed"):  # counted as it arrives
            download(f"{server.url}/unannounced", tmp_path / "big", service="stub", limit_bytes=1000)
        assert not (tmp_path / "big").exists()
        assert download(f"{server.url}/big", tmp_path / "big", service="stub", limit_bytes=5000) == 5000


@pytest.mark.parametrize(
    ("setting", "expected"),
    [
        ("bad token", "GitHub API answered 401 for"),
        ("forbidden", "Resource not accessible by integration"),
        ("private", f"{REPO} not found on GitHub (404 from"),
        ("expired after listing", "GitHub API answered 410 for"),
    ],
)
def test_what_github_refuses_is_a_warning_that_says_why(
    github: GitHubArtifacts, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, setting: str, expected: str
) -> None:
    artifact = github.add(StoredArtifact(1, "specforge-npu-attempt-1", 10, "main", when(1), outputs_zip("x")))
    if setting == "bad token":
        monkeypatch.setenv("GITHUB_TOKEN", "ghs_revoked")
    elif setting == "forbidden":
        github.forbidden = True
    elif setting == "private":
        github.private = True
        monkeypatch.delenv("GITHUB_TOKEN")
    else:
        github.api.set(f"/repos/{REPO}/actions/artifacts/{artifact.id}/zip", {"message": "Artifact has expired"}, 410)

    fetched = fetch(tmp_path)

    assert fetched.directory is None and fetched.failed
    assert expected in fetched.message, fetched.message
    if setting == "bad token":
        assert "Bad credentials" in fetched.message
    if setting == "expired after listing":
        assert fetched.message.startswith("artifact specforge-npu-attempt-1 of run 10 on main")
        assert "Artifact has expired" in fetched.message


def test_gh_token_is_used_when_github_token_is_not_set(
    github: GitHubArtifacts, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    github.private = True
    github.add(StoredArtifact(1, "specforge-npu-attempt-1", 10, "main", when(1), outputs_zip("with gh's token")))
    monkeypatch.delenv("GITHUB_TOKEN")
    monkeypatch.setenv("GH_TOKEN", TOKEN)
    assert marker(fetch(tmp_path)) == "with gh's token"


def test_the_stand_in_storage_rejects_a_leaked_token(github: GitHubArtifacts) -> None:
    """The storage check above could not fail if the stand-in accepted any header: show that it does not."""
    import requests

    github.add(StoredArtifact(1, "specforge-npu-attempt-1", 10, "main", when(1), outputs_zip("x")))
    redirect = requests.get(
        f"{github.api.url}/repos/{REPO}/actions/artifacts/1/zip",
        headers={"Authorization": f"Bearer {TOKEN}"},
        allow_redirects=False,
        timeout=5,
    )
    assert redirect.status_code == 302
    leaked = requests.get(redirect.headers["Location"], headers={"Authorization": f"Bearer {TOKEN}"}, timeout=5)
    assert leaked.status_code == 400


def test_a_next_page_on_another_host_is_not_asked_for(tmp_path: Path) -> None:
    with running_stub() as api, running_stub() as elsewhere:
        link = f'<{elsewhere.url}/steal?page=2>; rel="next"'
        api.set("/list", {"artifacts": []}, headers={"Link": link})
        pages = get_json_pages(f"{api.url}/list", service="stub", headers={"Authorization": "Bearer t"})
        with pytest.raises(WebError, match="put its next page on another host"):
            list(pages)
        assert elsewhere.requests == []
