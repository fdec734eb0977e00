"""docs/configuration.md's settings tables are exactly what the settings tables render."""

from logserver import settings_reference


def test_the_manual_lists_every_setting_as_the_code_declares_it():
    page = settings_reference.PAGE.read_text()
    assert settings_reference.current(page) == settings_reference.render(), (
        "docs/configuration.md is stale: run python -m logserver.settings_reference --write")


def test_every_setting_has_a_row():
    rendered = settings_reference.render()
    from logserver.config import SETTINGS
    from logserver.topic_config import TOPIC_SETTINGS

    for name in [*SETTINGS, *TOPIC_SETTINGS]:
        assert f"| `{name}` |" in rendered, name
