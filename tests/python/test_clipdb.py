"""The clipdb Python package (python/) against the clipdb program: embeddings equal
`clipdb embed`'s bit for bit, searches equal `clipdb search --json`'s hit for hit (ids,
paths, float32 scores, order), on a database of generated world photos made with the
bundled model. run_pytest.sh installs the package into a venv and sets the environment:
CLIPDB_BIN (the program), CLIPDB_WORLD (clipdb-world), CLIPDB_TEST_MODEL (the model)
and CLIPDB_LIBRARY (the libclipdb.so.1 under test)."""
import datetime
import json
import os
import shutil
import struct
import subprocess
import threading

import numpy as np
import pytest

import clipdb

BIN = os.environ["CLIPDB_BIN"]
WORLD = os.environ["CLIPDB_WORLD"]
MODEL = os.environ["CLIPDB_TEST_MODEL"]
QUERIES = ["a red circle", "a blue square + a green triangle - a yellow star", "stripes"]


def cli(*args):
    env = dict(os.environ, NO_COLOR="1")
    env.pop("CLIPDB_MODEL", None)
    return subprocess.run([BIN, *args], check=True, capture_output=True, env=env).stdout


def f32(x):
    """The float32 the CLI's 9 significant digits name."""
    return struct.unpack("f", struct.pack("f", x))[0]


@pytest.fixture(scope="session")
def library(tmp_path_factory):
    """Two folders of world photos and their manifest sizes: (root, {path: (w, h)})."""
    root = tmp_path_factory.mktemp("photos")
    sizes = {}
    for sub, seed in (("a", "11"), ("b", "12")):
        d = root / sub
        subprocess.run([WORLD, "generate", str(d), "--seed", seed, "--n", "20"], check=True,
                       capture_output=True)
        for line in open(d / "manifest.jsonl"):
            r = json.loads(line)
            sizes[str(d / r["path"])] = (r["scene"]["width"], r["scene"]["height"])
        os.remove(d / "manifest.jsonl")
    return root, sizes


@pytest.fixture(scope="session")
def db_path(library, tmp_path_factory):
    """A database made and filled through the Python API."""
    path = tmp_path_factory.mktemp("db") / "photos.clipdb"
    calls = []
    with clipdb.Database.create(path, MODEL) as db:
        rep = db.ingest([library[0]], progress=lambda *a: calls.append(a))
    assert rep.added == 40 and rep.errors == 0 and not rep.partial and not rep.interrupted
    assert calls and all(c[0] == "ingest" for c in calls)
    assert calls[-1][1] == 40  # done, at the end: every photo
    return path


def test_installed_package_is_used():
    assert "site-packages" in clipdb.__file__, clipdb.__file__
    assert clipdb.library_version() in cli("--version").decode()


def test_embed_text_equals_cli(tmp_path):
    texts = ["a red circle", "a photo of a dog", "", "x" * 400]
    with clipdb.Model(MODEL, device="cpu") as m:
        got = m.embed_text(texts)
        raw = m.embed_text(texts, raw=True)
        assert m.name and m.dim == got.shape[1]
    assert got.dtype == np.float32 and got.shape == (len(texts), got.shape[1])
    for arr, extra in ((got, []), (raw, ["--raw"])):
        out = tmp_path / "t.npy"
        args = ["embed", "--model", MODEL, "--device", "cpu", "--format", "npy", "--out", str(out)]
        for t in texts:
            args += ["--text", t]
        cli(*args, *extra)
        want = np.load(out)
        assert want.dtype == np.float32 and want.shape == arr.shape
        assert (want.view(np.uint32) == arr.view(np.uint32)).all()  # bit for bit
    assert not np.allclose(got, raw)


def test_embed_image_equals_cli(library, tmp_path):
    images = sorted(library[1])[:34]  # more than the CLI's batch of 32
    with clipdb.Model(MODEL, device="cpu", threads=2) as m:
        got = m.embed_image(images)
    out = tmp_path / "i.npy"
    args = ["embed", "--model", MODEL, "--device", "cpu", "--format", "npy", "--out", str(out)]
    for p in images:
        args += ["--image", p]
    cli(*args)
    want = np.load(out)
    assert got.shape == want.shape == (34, got.shape[1])
    assert (want.view(np.uint32) == got.view(np.uint32)).all()


def cli_hits(db_path, text, *extra):
    doc = json.loads(cli("search", "--db", str(db_path), "--json", text, *extra))
    return [(h["id"], h["path"], f32(h["score"])) for h in doc["hits"]]


def as_tuples(hits):
    return [(h.id, h.path, h.score) for h in hits]


@pytest.mark.parametrize("text", QUERIES)
def test_search_equals_cli(db_path, text):
    with clipdb.Database(db_path) as db:
        assert as_tuples(db.search(text)) == cli_hits(db_path, text)
        assert as_tuples(db.search(text, k=25)) == cli_hits(db_path, text, "-k", "25")


def test_search_under_and_min_score_equal_cli(db_path, library):
    a = str(library[0] / "a")
    with clipdb.Database(db_path) as db:
        under = db.search("a red circle", k=40, under=a)
        assert len(under) == 20 and all(h.path.startswith(a + "/") for h in under)
        assert as_tuples(under) == cli_hits(db_path, "a red circle", "-k", "40", "--under", a)
        both = db.search("a red circle", k=40, under=[a, str(library[0] / "b")])
        assert len(both) == 40
        cut = sorted(h.score for h in db.search("a red circle", k=40))[20]
        high = db.search("a red circle", k=40, min_score=cut)
        assert 0 < len(high) < 40 and all(h.score >= f32(cut) for h in high)
        assert as_tuples(high) == cli_hits(db_path, "a red circle", "-k", "40", "--min-score",
                                           repr(cut))


def test_metadata_filters_and_sort_equal_cli(db_path):
    """World photos carry no EXIF: each is dated by its file time (taken_source "file"),
    and the filters and the sort by capture time are the CLI's."""
    with clipdb.Database(db_path) as db:
        hits = db.search("a red circle", k=10, taken_after="2000-01-01", sort="taken-asc")
        assert as_tuples(hits) == cli_hits(db_path, "a red circle", "-k", "10", "--taken-after",
                                           "2000-01-01", "--sort", "taken-asc")
        assert hits and all(h.taken_source == "file" and h.taken.endswith("Z") for h in hits)
        when = [datetime.datetime.fromisoformat(h.taken.replace("Z", "+00:00")) for h in hits]
        assert when == sorted(when)
        assert db.search("a red circle", taken_before="2000-01-01T00:00Z") == []
        assert db.search("a red circle", has_gps=True) == []
        assert db.search("a red circle", near=(48.85, 2.35, 50)) == []
        assert db.search("a red circle", camera="canon") == []
        with pytest.raises(clipdb.Error):
            db.search("a red circle", taken_after="yesterday")
        with pytest.raises(clipdb.Error):
            db.search("a red circle", sort="best")


def test_hit_sizes_are_the_photos(db_path, library):
    with clipdb.Database(db_path) as db:
        hits = db.search("a photo", k=40)
    assert len(hits) == 40
    for h in hits:
        assert (h.width, h.height) == library[1][h.path], h


def test_concurrent_searches_equal_serial(db_path):
    with clipdb.Database(db_path) as db:
        want = {t: as_tuples(db.search(t)) for t in QUERIES}
        got, errors = [], []

        def worker():
            try:
                for t in QUERIES * 3:
                    got.append(as_tuples(db.search(t)) == want[t])
            except Exception as e:  # noqa: BLE001 (reported below)
                errors.append(e)
        threads = [threading.Thread(target=worker) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not errors and len(got) == 36 and all(got)


def test_reindex_and_progress_stop(library, tmp_path):
    root = tmp_path / "lib"
    shutil.copytree(library[0] / "a", root)
    with clipdb.Database.create(tmp_path / "db", MODEL) as db:
        # a stop commits the batch in flight (here all 20 photos may be in it)
        stopped = db.ingest(root, progress=lambda label, done, total, errors: done >= 1)
        assert stopped.interrupted and stopped.added <= 20
        rest = db.ingest([root])
        assert stopped.added + rest.added == 20 and not rest.interrupted
        victim = sorted(root.iterdir())[0]
        shutil.copy(victim, root / "copy-of-first")  # a new file (same content)
        victim.unlink()
        rep = db.reindex()
        assert rep.deleted + rep.moved >= 1 and rep.found == 20, rep
        paths = [h.path for h in db.search("a red circle", k=40)]
        assert len(paths) == 20 and str(victim) not in paths
        assert str(root / "copy-of-first") in paths

        def boom(*args):
            raise KeyError("from the callback")
        (root / "more").mkdir()
        shutil.copy(sorted(library[1])[-1], root / "more" / "x.png")
        with pytest.raises(KeyError):
            db.reindex(progress=boom)


def test_index_build_types_and_on_disk(library, tmp_path):
    with clipdb.Database.create(tmp_path / "db", MODEL) as db:
        db.ingest(library[0] / "a")
        want = [(h.path, h.score) for h in db.search("a red circle", k=20)]
        db.index_build("flat")  # exact: the same hits and scores
        assert [(h.path, h.score) for h in db.search("a red circle", k=20)] == want
        with pytest.raises(clipdb.Error) as e:  # a flat index has no lists to put on disk
            db.index_build("flat", on_disk=True)
        assert e.value.status_name == "unsupported"
        with pytest.raises(clipdb.Error):
            db.index_build("no-such-type")
    assert (tmp_path / "db" / "index" / "model_1.snap").exists()


def test_errors_carry_status_and_message(tmp_path, db_path):
    with pytest.raises(clipdb.Error) as e:
        clipdb.Database(tmp_path / "nothing-here")
    assert e.value.status == 6 and e.value.status_name == "not found"
    assert str(tmp_path / "nothing-here") in e.value.message
    with pytest.raises(clipdb.Error) as e:
        clipdb.Model(tmp_path / "no-model")
    assert e.value.status != 0 and "no-model" in e.value.message
    with clipdb.Database(db_path) as db:
        for bad in ("a - a", ""):
            with pytest.raises(clipdb.Error) as e:
                db.search(bad)
            assert e.value.status == 5 and e.value.message  # CLIPDB_INVALID
        with pytest.raises(clipdb.Error) as e:
            db.search("x", k=0)
        assert e.value.status == 5
        with pytest.raises(clipdb.Error) as e:
            db.ingest([tmp_path / "missing"])
        assert e.value.status == 6 and "missing" in e.value.message
    with clipdb.Model(MODEL, device="cpu") as m:
        with pytest.raises(clipdb.Error) as e:
            m.embed_image([tmp_path / "missing.png"])
        assert "missing.png" in e.value.message
    with pytest.raises(clipdb.Error) as e:
        clipdb.Model(MODEL, device="tpu")
    assert e.value.status == 5


@pytest.mark.parametrize("text", QUERIES)
def test_search_many_equals_one_database_of_all(db_path, library, tmp_path, text):
    """clipdb.search over a database per folder (a and b, given in the other order than
    their paths') gives the hits and float32 scores of db_path, which holds both
    folders: the oracle, the encoder being batch-invariant."""
    parts = []
    for sub in ("b", "a"):
        path = tmp_path / (sub + ".clipdb")
        with clipdb.Database.create(path, MODEL) as db:
            db.ingest([library[0] / sub])
        parts.append(clipdb.Database(path))
    try:
        with clipdb.Database(db_path) as one:
            for k in (1, 7, 40):
                want = one.search(text, k=k)
                got = clipdb.search(parts, text, k=k)
                assert [(h.path, h.score) for h in got] == [(h.path, h.score) for h in want]
                for h in got:  # .db: the database that holds it, its folder
                    assert os.sep + ("b" if h.db == 0 else "a") + os.sep in h.path
            got = clipdb.search(parts, text, k=9, under=str(library[0] / "a"), min_score=0.1)
            want = one.search(text, k=9, under=str(library[0] / "a"), min_score=0.1)
            assert [(h.path, h.score) for h in got] == [(h.path, h.score) for h in want]
    finally:
        for p in parts:
            p.close()
    with pytest.raises(ValueError):
        clipdb.search([], text)


def write_ppm(path, seed, half=False):
    """A picture of seed (a background and five rectangles) as a P6 file, at half size
    (2x2 averages, as a resized copy) when asked."""
    rng = np.random.default_rng(seed)
    img = np.empty((144, 192, 3), dtype=np.uint8)
    img[:] = rng.integers(0, 256, 3)
    for _ in range(5):
        x, y = rng.integers(0, 150), rng.integers(0, 110)
        img[y:y + rng.integers(15, 75), x:x + rng.integers(20, 100)] = rng.integers(0, 256, 3)
    if half:
        img = ((img.reshape(72, 2, 96, 2, 3).astype(np.uint32).sum(axis=(1, 3)) + 2) // 4)
        img = img.astype(np.uint8)
    with open(path, "wb") as f:
        f.write(b"P6\n%d %d\n255\n" % (img.shape[1], img.shape[0]) + img.tobytes())


@pytest.fixture(scope="session")
def copies(tmp_path_factory):
    """Folders ca and cb of pictures with copies (the same bytes in cb and in ca, a half
    size copy in cb) and three databases, their phashes stored by a reindex: one of each
    folder and one of both. Returns (db_a, db_b, db_all)."""
    root = tmp_path_factory.mktemp("copies")
    (root / "ca").mkdir()
    (root / "cb").mkdir()
    for i in range(6):
        write_ppm(root / "ca" / ("pic%d.ppm" % i), 100 + i)
        write_ppm(root / "cb" / ("pic%d.ppm" % i), 200 + i)
    shutil.copy(root / "ca" / "pic0.ppm", root / "cb" / "same_a0.ppm")
    shutil.copy(root / "ca" / "pic3.ppm", root / "ca" / "pic3_copy.ppm")
    write_ppm(root / "cb" / "half_a1.ppm", 101, half=True)
    dbs = []
    for name, folders in (("a", ["ca"]), ("b", ["cb"]), ("all", ["ca", "cb"])):
        path = root / (name + ".clipdb")
        with clipdb.Database.create(path, MODEL) as db:
            db.ingest([root / f for f in folders])
            db.reindex()  # stores the perceptual hashes near copies are found by
        dbs.append(path)
    return dbs


def cli_collapsed(dbs, text, *extra):
    args = ["search", "--json", text, *extra]
    for d in dbs:
        args += ["--db", str(d)]
    doc = json.loads(cli(*args))
    return [(h.get("db", 0), h["id"], h["path"], f32(h["score"]), h.get("copies", []),
             h.get("copies_db", [h.get("db", 0)] * len(h.get("copies", []))))
            for h in doc["hits"]]


def as_collapsed(hits):
    return [(h.db, h.id, h.path, h.score, h.copies, h.copies_db or [h.db] * len(h.copies))
            for h in hits]


@pytest.mark.parametrize("text", QUERIES)
def test_collapse_equals_cli(copies, text):
    """Database.search(collapse=True) gives `clipdb search --json`'s hits (collapsed, the
    CLI's default) with their copies; collapse=False gives --no-collapse's."""
    db_a, db_b, db_all = copies
    with clipdb.Database(db_all) as db:
        for k in (2, 5, 40):
            got = db.search(text, k=k, collapse=True)
            assert as_collapsed(got) == cli_collapsed([db_all], text, "-k", str(k))
            assert sum(len(h.copies) for h in got[:k]) >= (3 if k == 40 else 0)
            plain = db.search(text, k=k)
            assert as_collapsed(plain) == cli_collapsed([db_all], text, "-k", str(k),
                                                        "--no-collapse")
            assert all(not h.copies for h in plain)
        assert len(db.search(text, k=40, collapse=True)) == 15 - 3  # 15 files, 3 copies


@pytest.mark.parametrize("text", QUERIES)
def test_collapse_many_equals_cli(copies, text):
    """clipdb.search(collapse=True) over the two folders' databases gives `clipdb search
    --db B --db A --json`'s hits, copies and copies' databases, and the hits of the
    database of both (copies in two databases are one hit)."""
    db_a, db_b, db_all = copies
    parts = [clipdb.Database(db_b), clipdb.Database(db_a)]
    try:
        with clipdb.Database(db_all) as one:
            for k in (1, 4, 40):
                got = clipdb.search(parts, text, k=k, collapse=True)
                assert as_collapsed(got) == cli_collapsed([db_b, db_a], text, "-k", str(k))
                want = one.search(text, k=k, collapse=True)
                assert [(h.path, h.score, len(h.copies)) for h in got] == \
                    [(h.path, h.score, len(h.copies)) for h in want]
            got = clipdb.search(parts, text, k=40, collapse=True)
            assert any(d != h.db for h in got for d in h.copies_db)  # a copy in the other
    finally:
        for p in parts:
            p.close()
