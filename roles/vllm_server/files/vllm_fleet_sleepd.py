"""vllm-fleet sleep controller (#28): a reverse proxy in front of a host's models that may sleep.

Hand-written because no library fronts vLLM's sleep API (POST /sleep?level=N, POST /wake_up, GET
/is_sleeping, registered with VLLM_SERVER_DEV_MODE=1). It runs in the host's vLLM image (its Python has
aiohttp and prometheus_client) with this file and sleep_control.py (the decisions, unit-tested in the
collection) mounted read-only:

    python3 vllm_fleet_sleepd.py CONFIG.json

The gateway sends each sleep-enabled model's requests here, to the model's own port or to the shared port
(there the JSON body's "model" picks it). A request for a sleeping model wakes it (after putting the least
recently used idle models to sleep when the awake set would exceed the budget) and is held, with any other
requests for it, until vLLM says it is awake; then it is forwarded, streamed chunk by chunk. Models idle
for idle_seconds go to sleep. Only /v1/ paths are forwarded: clients never reach /sleep or /wake_up.
GET /metrics (Prometheus) and GET /health on the shared port are the controller's own; on a model's port
they (and /version, /load, /ping) are its vLLM's, forwarded without waking it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
import time
from pathlib import Path

import aiohttp
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, Counter, Gauge, Histogram, generate_latest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sleep_control import Model, idle, make_room, over_budget  # noqa: E402

log = logging.getLogger("vllm_fleet_sleepd")

WAKES = Counter("vllm_fleet_sleep_wakes", "Wakes of a sleeping model", ["model"])
WAKE_SECONDS = Histogram(
    "vllm_fleet_sleep_wake_seconds",
    "From the wake order to vLLM saying it is awake",
    ["model"],
    buckets=(0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300),
)
SLEEPS = Counter("vllm_fleet_sleep_sleeps", "Models put to sleep", ["model", "reason"])
FAILURES = Counter("vllm_fleet_sleep_failures", "Sleep or wake orders vLLM refused", ["model", "op"])
AWAKE = Gauge("vllm_fleet_sleep_awake", "1 when the model is awake", ["model"])
IN_FLIGHT = Gauge("vllm_fleet_sleep_in_flight", "Requests forwarded or held for the model", ["model"])
AWAKE_BYTES = Gauge("vllm_fleet_sleep_awake_bytes", "GPU bytes of the awake models, as planned")
BUDGET = Gauge("vllm_fleet_sleep_budget_bytes", "GPU bytes the plan allows awake at once")

# read-only vLLM paths a model's own port forwards (GET never wakes a model)
PASS_GET = {"/metrics", "/health", "/version", "/load", "/ping"}

# hop-by-hop headers (RFC 9110 7.6.1) and those aiohttp sets itself
HOP = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
       "transfer-encoding", "upgrade", "host", "content-length"}  # fmt: skip


class Served:
    def __init__(self, spec: dict) -> None:
        self.name: str = spec["name"]
        self.backend: str = spec["backend"]
        self.level: int = int(spec["level"])
        self.bytes: int = int(spec["bytes"])
        self.awake = True
        self.in_flight = 0
        self.last_used = time.monotonic()

    def view(self) -> Model:
        return Model(self.name, self.bytes, self.awake, self.in_flight, self.last_used)


class Controller:
    def __init__(self, config: dict) -> None:
        self.config = config
        self.models = {m["name"]: Served(m) for m in config["models"]}
        self.budget = int(config["budget_bytes"])
        self.idle_seconds = float(config.get("idle_seconds") or 0)
        self.wake_timeout = float(config.get("wake_timeout") or 600)
        key = config.get("api_key") or os.environ.get("VLLM_API_KEY", "")
        self.headers = {"Authorization": f"Bearer {key}"} if key else {}
        # one change of the awake set at a time; requests to awake models never wait on it
        self.lock = asyncio.Lock()
        self.freed = asyncio.Condition()  # a request finished: an in-flight model may now sleep
        self.session: aiohttp.ClientSession | None = None
        BUDGET.set(self.budget)

    # --- vLLM's sleep API -------------------------------------------------------------------------
    async def _call(self, method: str, model: Served, path: str, **kw) -> tuple[int, str]:
        assert self.session is not None
        async with self.session.request(method, model.backend + path, headers=self.headers, **kw) as r:
            return r.status, await r.text()

    async def _is_sleeping(self, model: Served) -> bool | None:
        try:
            status, text = await self._call("GET", model, "/is_sleeping")
            return bool(json.loads(text)["is_sleeping"]) if status == 200 else None
        except (TimeoutError, aiohttp.ClientError, ValueError, KeyError):
            return None

    async def _sleep(self, model: Served, reason: str) -> None:
        model.awake = False  # at once: a request arriving meanwhile takes the wake path
        self._gauges()
        try:
            status, text = await self._call("POST", model, f"/sleep?level={model.level}")
        except (TimeoutError, aiohttp.ClientError) as exc:
            status, text = 0, str(exc)
        if status != 200:
            FAILURES.labels(model.name, "sleep").inc()
            log.warning("sleep %s: %s %s", model.name, status, text[:200])
            return  # counted asleep: the next request wakes it, which is harmless on an awake vLLM
        SLEEPS.labels(model.name, reason).inc()
        log.info("slept %s (level %d, %s)", model.name, model.level, reason)

    async def _wake(self, model: Served) -> None:
        started = time.monotonic()
        if model.level == 2:
            # level 2 dropped the weights: wake the weights' memory, reload them from disk, then the KV cache
            steps = [("/wake_up?tags=weights", None), ("/collective_rpc", {"method": "reload_weights"}),
                     ("/wake_up?tags=kv_cache", None)]  # fmt: skip
        else:
            steps = [("/wake_up", None)]
        for path, body in steps:
            status, text = await self._call("POST", model, path, json=body)
            if status != 200:
                FAILURES.labels(model.name, "wake").inc()
                raise web.HTTPServiceUnavailable(text=f"waking {model.name} failed: {status} {text[:200]}")
        while (sleeping := await self._is_sleeping(model)) is not False:
            if time.monotonic() - started > self.wake_timeout:
                FAILURES.labels(model.name, "wake").inc()
                raise web.HTTPServiceUnavailable(text=f"{model.name} did not wake in time")
            await asyncio.sleep(0.05 if sleeping else 0.5)
        took = time.monotonic() - started
        model.awake = True
        WAKES.labels(model.name).inc()
        WAKE_SECONDS.labels(model.name).observe(took)
        self._gauges()
        log.info("woke %s in %.3f s", model.name, took)

    def _gauges(self) -> None:
        for m in self.models.values():
            AWAKE.labels(m.name).set(1 if m.awake else 0)
            IN_FLIGHT.labels(m.name).set(m.in_flight)
        AWAKE_BYTES.set(sum(m.bytes for m in self.models.values() if m.awake))

    # --- the awake set ----------------------------------------------------------------------------
    async def ensure_awake(self, model: Served) -> None:
        """Wake ``model`` (its caller counted in model.in_flight first), making room under the budget."""
        deadline = time.monotonic() + self.wake_timeout
        while not model.awake:
            async with self.lock:
                if model.awake:
                    return
                room = make_room([m.view() for m in self.models.values()], model.name, self.budget)
                if room.fits:
                    for name in room.sleep:
                        await self._sleep(self.models[name], "room")
                    await self._wake(model)
                    return
            # only models serving requests could make room: wait for one of them to finish
            async with self.freed:
                try:
                    await asyncio.wait_for(self.freed.wait(), max(0.1, deadline - time.monotonic()))
                except TimeoutError:
                    raise web.HTTPServiceUnavailable(
                        text=f"no room to wake {model.name}: the awake models stay busy"
                    ) from None

    async def enforce(self) -> None:
        """Idle models to sleep, and the awake set back within the budget (at start, vLLMs are awake)."""
        async with self.lock:
            views = [m.view() for m in self.models.values()]
            for reason, names in (("budget", over_budget(views, self.budget)),
                                  ("idle", idle(views, time.monotonic(), self.idle_seconds))):  # fmt: skip
                for name in names:
                    model = self.models[name]
                    if model.awake and not model.in_flight:  # a request may have come while one slept
                        await self._sleep(model, reason)

    async def idle_loop(self) -> None:
        while True:
            await self.enforce()
            await asyncio.sleep(min(1.0, self.idle_seconds / 4) if self.idle_seconds else 1.0)

    async def sync(self) -> None:
        """At start: what each vLLM says (asleep, awake, or not up yet: counted awake, the safe side)."""
        for m in self.models.values():
            m.awake = await self._is_sleeping(m) is not True
        self._gauges()

    # --- the proxy --------------------------------------------------------------------------------
    async def forward(
        self, request: web.Request, model: Served, body: bytes, use: bool = True
    ) -> web.StreamResponse:
        """``use``: a client's request (counted in flight, keeps the model from idling); a scrape of its
        metrics or health is not."""
        assert self.session is not None
        if use:
            model.in_flight += 1
            model.last_used = time.monotonic()
            self._gauges()
        try:
            if use and request.method == "POST":  # inference; GETs (/v1/models) are answered asleep too
                await self.ensure_awake(model)
            headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP}
            async with self.session.request(
                request.method, model.backend + request.rel_url.path_qs, headers=headers, data=body or None
            ) as upstream:
                response = web.StreamResponse(
                    status=upstream.status,
                    headers={k: v for k, v in upstream.headers.items() if k.lower() not in HOP},
                )
                await response.prepare(request)
                # each chunk as it comes (SSE tokens); a client gone raises here or cancels this task:
                # closing the upstream connection then makes vLLM abort the request
                try:
                    async for chunk in upstream.content.iter_any():
                        await response.write(chunk)
                except (asyncio.CancelledError, ConnectionResetError):
                    upstream.close()
                    raise
                await response.write_eof()
                return response
        except aiohttp.ClientError as exc:
            raise web.HTTPBadGateway(text=f"{model.name}: {exc}") from None
        finally:
            if use:
                model.in_flight -= 1
                model.last_used = time.monotonic()
                self._gauges()
                async with self.freed:
                    self.freed.notify_all()

    async def handle(self, request: web.Request) -> web.StreamResponse:
        model = request.app.get("model")
        if model is not None and request.method == "GET" and request.path in PASS_GET:
            # the model's own port answers like its vLLM (asleep too, never waking it): Prometheus, the
            # rollout's drain and readiness read vLLM's metrics and health at the model's address
            return await self.forward(request, model, b"", use=False)
        if not request.path.startswith("/v1/"):
            raise web.HTTPNotFound()
        body = await request.read()
        if model is None:
            try:
                name = json.loads(body or b"{}").get("model")
            except (ValueError, AttributeError):
                name = None
            model = self.models.get(name) if isinstance(name, str) else None
            if model is None:
                raise web.HTTPNotFound(text=json.dumps({"error": f"model {name!r} is not served here"}),
                                       content_type="application/json")  # fmt: skip
        return await self.forward(request, model, body)


async def metrics(_request: web.Request) -> web.Response:
    return web.Response(body=generate_latest(), headers={"Content-Type": CONTENT_TYPE_LATEST})


async def health(_request: web.Request) -> web.Response:
    return web.Response(text="ok")


def app_for(controller: Controller, model: Served | None) -> web.Application:
    app = web.Application(client_max_size=64 * 1024**2)
    if model is not None:
        app["model"] = model
    else:  # the controller's own, on its shared port (a model's port has its vLLM's)
        app.router.add_get("/metrics", metrics)
        app.router.add_get("/health", health)
    app.router.add_route("*", "/{tail:.*}", controller.handle)
    return app


async def main(path: str) -> None:
    config = json.loads(Path(path).read_text())
    controller = Controller(config)
    # no total timeout: a generation may take long; connecting must not
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=10)
    controller.session = aiohttp.ClientSession(timeout=timeout, auto_decompress=False)
    await controller.sync()
    listen = config.get("listen", "0.0.0.0")
    runners = []
    ports = [(int(config["port"]), None)] if config.get("port") else []
    ports += [(int(m["port"]), controller.models[m["name"]]) for m in config["models"] if m.get("port")]
    for port, model in ports:
        # handler_cancellation: a client that disconnects cancels its handler, so the upstream closes too
        runner = web.AppRunner(app_for(controller, model), handler_cancellation=True, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, listen, port).start()
        runners.append(runner)
        log.info("listening on %s:%d for %s", listen, port, model.name if model else "every model (by body)")
    try:
        await controller.idle_loop()
    finally:
        for runner in runners:
            await runner.cleanup()
        await controller.session.close()


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    asyncio.run(main(sys.argv[1]))
