"""The sleep controller's decisions (#28): which awake models sleep to make room for a wake (least recently
used first, never one serving requests), which idle out, and its checked configuration."""

from __future__ import annotations

import pytest
from ansible_collections.vllm_fleet.vllm_fleet.plugins.plugin_utils.fleet_serving.sleep_control import (
    Model,
    controller_config,
    idle,
    make_room,
    over_budget,
)

GIB = 1 << 30


def test_room_for_one_sleeps_the_other():
    room = make_room([Model("a", GIB, True, 0, 5.0), Model("b", GIB, False)], "b", GIB)
    assert room.sleep == ("a",) and room.fits and room.awake_bytes == GIB


def test_least_recently_used_sleeps_first_and_only_as_many_as_needed():
    models = [
        Model("a", 10 * GIB, True, 0, 30.0),
        Model("b", 10 * GIB, True, 0, 10.0),  # the oldest
        Model("c", 10 * GIB, True, 0, 20.0),
        Model("d", 10 * GIB, False),
    ]
    assert make_room(models, "d", 30 * GIB).sleep == ("b",)
    assert make_room(models, "d", 20 * GIB).sleep == ("b", "c")


def test_a_model_serving_requests_is_never_put_to_sleep():
    models = [Model("a", GIB, True, 2, 1.0), Model("b", GIB, True, 0, 9.0), Model("c", GIB, False)]
    room = make_room(models, "c", 2 * GIB)
    assert room.sleep == ("b",) and room.fits  # a is older but busy: b goes instead


def test_no_room_while_only_busy_models_could_make_it():
    room = make_room([Model("a", GIB, True, 1, 1.0), Model("b", GIB, False)], "b", GIB)
    assert not room.fits and room.sleep == ()  # the controller holds the request until a finishes


def test_fits_already_sleeps_nothing():
    models = [Model("a", GIB, True, 0, 1.0), Model("b", GIB, False)]
    assert make_room(models, "b", 2 * GIB) == make_room(models, "b", 2 * GIB)
    assert make_room(models, "b", 2 * GIB).sleep == ()


def test_a_model_bigger_than_the_budget_wakes_alone():
    room = make_room([Model("a", GIB, True, 0, 1.0), Model("big", 3 * GIB, False)], "big", 2 * GIB)
    assert room.sleep == ("a",) and room.fits


def test_unknown_model():
    with pytest.raises(KeyError):
        make_room([Model("a", GIB, True)], "nope", GIB)


def test_over_budget_at_start_sleeps_all_but_what_fits():
    models = [Model("a", GIB, True, 0, 2.0), Model("b", GIB, True, 0, 1.0), Model("c", GIB, True, 1, 0.0)]
    assert over_budget(models, GIB) == ["b", "a"]  # c serves a request: it stays
    assert over_budget(models, 3 * GIB) == []
    assert over_budget([Model("a", GIB, False)], 0) == []


def test_idle():
    models = [
        Model("a", GIB, True, 0, 0.0),  # idle 100 s
        Model("b", GIB, True, 1, 0.0),  # busy
        Model("c", GIB, True, 0, 95.0),  # used 5 s ago
        Model("d", GIB, False, 0, 0.0),  # asleep already
    ]
    assert idle(models, 100.0, 60) == ["a"]
    assert idle(models, 100.0, 0) == []  # 0: never idles out


def test_config():
    config = controller_config(
        [{"name": "a", "backend": "http://10.0.0.1:8000/", "level": 1, "bytes": GIB, "port": 8101}],
        budget=GIB,
        idle_seconds=300,
        port=8100,
        api_key="k",
    )
    assert config["models"] == [
        {"name": "a", "backend": "http://10.0.0.1:8000", "level": 1, "bytes": GIB, "port": 8101}
    ]
    assert config["budget_bytes"] == GIB and config["idle_seconds"] == 300.0 and config["port"] == 8100


@pytest.mark.parametrize(
    ("model", "budget", "match"),
    [
        ({"name": "a", "backend": "http://x:1", "level": 3, "bytes": 1}, 1, "level"),
        ({"name": "a", "backend": "http://x:1", "level": True, "bytes": 1}, 1, "level"),
        ({"name": "a", "backend": "x:1", "level": 1, "bytes": 1}, 1, "backend"),
        ({"name": "a", "backend": "http://x:1", "level": 2, "bytes": -1}, 1, "bytes"),
        ({"name": "", "backend": "http://x:1", "level": 2, "bytes": 1}, 1, "name"),
        ({"name": "a", "backend": "http://x:1", "level": 2, "bytes": 1}, 0, "budget"),
    ],
)
def test_config_refusals(model, budget, match):
    with pytest.raises(ValueError, match=match):
        controller_config([model], budget=budget, idle_seconds=1)


def test_config_repeated_name():
    model = {"name": "a", "backend": "http://x:1", "level": 1, "bytes": 1}
    with pytest.raises(ValueError, match="repeated"):
        controller_config([model, model], budget=1, idle_seconds=1)
