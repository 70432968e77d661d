"""Only graft fetch reaches the Hugging Face hub."""

from graft.services.offline import go_offline


def test_only_fetch_reaches_the_hub():
    env: dict[str, str] = {}
    assert not go_offline("fetch", env) and "HF_HUB_OFFLINE" not in env
    assert go_offline("train", env) and env["HF_HUB_OFFLINE"] == "1"
    assert not go_offline("evaluate", {"HF_HUB_OFFLINE": "0"})  # the user's setting wins
