"""clipdb: Python bindings of clipdb's C library (libclipdb.so, clipdb.h) through ctypes.

    import clipdb
    clipdb.Database.create("photos.clipdb", "/usr/local/share/clipdb/models/shapes-vit-tiny")
    with clipdb.Database("photos.clipdb") as db:
        db.ingest(["~/Pictures"], progress=lambda label, done, total, errors: print(done))
        for hit in db.search("a beach at sunset", k=5):
            print(hit.score, hit.path, hit.width, hit.height)
    with clipdb.Model("/usr/local/share/clipdb/models/shapes-vit-tiny") as m:
        v = m.embed_text(["a red circle"])   # numpy float32, shape (1, m.dim)

The library is found as CLIPDB_LIBRARY names it (a path), else as libclipdb.so.1 through
the loader's usual search (LD_LIBRARY_PATH, the ldconfig cache). Every failure raises
clipdb.Error, carrying the C status (.status, .status_name) and the library's sentence
(.message). Threads: one Database may search from many threads at once; ingest, reindex
and close need it alone. A Model embeds in one thread at a time.
"""
import ctypes
import os

import numpy as np

__all__ = ["Database", "Error", "Hit", "Model", "Report", "library_version", "search"]

_ABI = 1  # clipdb.h's CLIPDB_ABI_VERSION


def _load():
    path = os.environ.get("CLIPDB_LIBRARY")
    if path:
        return ctypes.CDLL(path)
    try:
        return ctypes.CDLL("libclipdb.so.%d" % _ABI)
    except OSError as e:
        raise ImportError("cannot load libclipdb.so.%d (%s): install clipdb's library, add "
                          "its folder to LD_LIBRARY_PATH, or set CLIPDB_LIBRARY to its path"
                          % (_ABI, e)) from None


_lib = _load()
_P = ctypes.c_void_p
_S = ctypes.c_char_p
_I64 = ctypes.c_int64
_PROGRESS = ctypes.CFUNCTYPE(ctypes.c_int, _P, _S, _I64, _I64, _I64)


def _fn(name, restype, *argtypes):
    f = getattr(_lib, name)
    f.restype = restype
    f.argtypes = list(argtypes)
    return f


_c = type("_c", (), {})  # the C functions, by their names without the clipdb_ prefix
for _name, _res, _args in [
        ("version", _S, ()), ("status_str", _S, (ctypes.c_int,)), ("errmsg", _S, ()),
        ("options_new", _P, ()), ("options_free", None, (_P,)),
        ("options_set_device", ctypes.c_int, (_P, _S)),
        ("options_set_threads", ctypes.c_int, (_P, ctypes.c_int)),
        ("options_set_lock_wait_ms", ctypes.c_int, (_P, ctypes.c_int)),
        ("create", ctypes.c_int, (_S, _S)),
        ("open", ctypes.c_int, (_S, _P, ctypes.POINTER(_P))), ("close", None, (_P,)),
        ("ingest", ctypes.c_int, (_P, ctypes.POINTER(_S), ctypes.c_int, _PROGRESS, _P,
                                  ctypes.POINTER(_P))),
        ("reindex", ctypes.c_int, (_P, _PROGRESS, _P, ctypes.POINTER(_P))),
        ("report_get", _I64, (_P, ctypes.c_int)), ("report_free", None, (_P,)),
        ("index_params_new", _P, ()), ("index_params_free", None, (_P,)),
        ("index_params_set_type", ctypes.c_int, (_P, _S)),
        ("index_params_set_on_disk", ctypes.c_int, (_P, ctypes.c_int)),
        ("index_build", ctypes.c_int, (_P, _P)),
        ("search_params_new", _P, ()), ("search_params_free", None, (_P,)),
        ("search_params_set_k", ctypes.c_int, (_P, ctypes.c_int)),
        ("search_params_set_min_score", ctypes.c_int, (_P, ctypes.c_double)),
        ("search_params_add_under", ctypes.c_int, (_P, _S)),
        ("search_params_set_filter", ctypes.c_int, (_P, _S, _S, _S, _S, ctypes.c_int)),
        ("search_params_set_sort", ctypes.c_int, (_P, _S)),
        ("search_params_set_collapse", ctypes.c_int, (_P, ctypes.c_int)),
        ("hits_copies", ctypes.c_int, (_P, ctypes.c_int)),
        ("hits_copy_id", _I64, (_P, ctypes.c_int, ctypes.c_int)),
        ("hits_copy_db", ctypes.c_int, (_P, ctypes.c_int, ctypes.c_int)),
        ("hits_taken", _S, (_P, ctypes.c_int)), ("hits_taken_source", _S, (_P, ctypes.c_int)),
        ("hits_make", _S, (_P, ctypes.c_int)), ("hits_model", _S, (_P, ctypes.c_int)),
        ("search_text", ctypes.c_int, (_P, _S, _P, ctypes.POINTER(_P))),
        ("search_text_many", ctypes.c_int,
         (ctypes.POINTER(_P), ctypes.c_int, _S, _P, ctypes.POINTER(_P))),
        ("hits_db", ctypes.c_int, (_P, ctypes.c_int)),
        ("hits_count", ctypes.c_int, (_P,)), ("hits_id", _I64, (_P, ctypes.c_int)),
        ("hits_path", _S, (_P, ctypes.c_int)), ("hits_score", ctypes.c_float, (_P, ctypes.c_int)),
        ("hits_width", ctypes.c_int, (_P, ctypes.c_int)),
        ("hits_height", ctypes.c_int, (_P, ctypes.c_int)), ("hits_free", None, (_P,)),
        ("model_open", ctypes.c_int, (_S, _P, ctypes.POINTER(_P))),
        ("model_close", None, (_P,)), ("model_dim", ctypes.c_int, (_P,)),
        ("model_name", _S, (_P,)),
        ("embed_texts", ctypes.c_int, (_P, ctypes.POINTER(_S), ctypes.c_int, ctypes.c_uint,
                                       ctypes.POINTER(ctypes.c_float))),
        ("embed_images", ctypes.c_int, (_P, ctypes.POINTER(_S), ctypes.c_int, ctypes.c_uint,
                                        ctypes.POINTER(ctypes.c_float)))]:
    setattr(_c, _name, staticmethod(_fn("clipdb_" + _name, _res, *_args)))

_EMBED_RAW = 1
_EMBED_NO_EXIF = 2


def library_version():
    """The linked libclipdb's version, e.g. "0.1.0"."""
    return _c.version().decode()


class Error(Exception):
    """A failed clipdb call: .status (clipdb_status), .status_name, .message."""

    def __init__(self, status, message):
        self.status = status
        self.status_name = _c.status_str(status).decode()
        self.message = message
        super().__init__("%s (%s)" % (message, self.status_name) if message else self.status_name)


def _check(status):
    if status != 0:
        raise Error(status, _c.errmsg().decode("utf-8", "surrogateescape"))


def _path(p):
    return os.fsencode(os.path.expanduser(os.fspath(p)))


def _strings(items, conv):
    if isinstance(items, (str, bytes, os.PathLike)):
        items = [items]
    enc = [conv(x) for x in items]
    return (_S * max(len(enc), 1))(*enc), len(enc)


def _open(fn, path, device, threads, lock_wait_ms=0):
    """fn(path, options, &handle) with clipdb_options made from the arguments: the
    handle."""
    o = _c.options_new()
    h = _P()
    if not o:
        raise MemoryError("clipdb: options")
    try:
        if device is not None:
            _check(_c.options_set_device(o, device.encode()))
        _check(_c.options_set_threads(o, int(threads)))
        _check(_c.options_set_lock_wait_ms(o, int(lock_wait_ms)))
        _check(fn(_path(path), o, ctypes.byref(h)))
    finally:
        _c.options_free(o)
    return h.value


class Hit:
    """One search hit: the file's .id, .path, .score (cosine similarity), .width and
    .height (pixels after EXIF orientation, 0 when unknown), .taken (the capture time,
    ISO 8601, or the file time in UTC), .taken_source ("original", "created", "xmp",
    "raw", or "file"), .make and .model ("" when absent), .db (the index of its database
    among those clipdb.search was given; 0 for Database.search: .id is that database's);
    with collapse=True, .copies (the ids of the other files of its copy group) and
    .copies_db (the database of each), else empty lists."""
    __slots__ = ("id", "path", "score", "width", "height", "taken", "taken_source", "make",
                 "model", "db", "copies", "copies_db")

    def __init__(self, id, path, score, width, height, taken="", taken_source="", make="",
                 model="", db=0, copies=(), copies_db=()):
        self.id, self.path, self.score, self.width, self.height = id, path, score, width, height
        self.taken, self.taken_source, self.make, self.model = taken, taken_source, make, model
        self.db, self.copies, self.copies_db = db, list(copies), list(copies_db)

    def __repr__(self):
        return "Hit(id=%d, score=%.4f, path=%r, width=%d, height=%d)" % (
            self.id, self.score, self.path, self.width, self.height)


class Report:
    """What an ingest or reindex did: found, added, changed, unchanged, moved, deleted,
    errors, retry, skipped (counts of files), partial and interrupted (booleans)."""
    FIELDS = ("found", "added", "changed", "unchanged", "moved", "deleted", "errors", "retry",
              "skipped", "partial", "interrupted")  # clipdb_report_field, in order

    def __init__(self, handle):
        for i, name in enumerate(self.FIELDS):
            v = _c.report_get(handle, i)
            setattr(self, name, bool(v) if name in ("partial", "interrupted") else v)

    def __repr__(self):
        return "Report(%s)" % ", ".join("%s=%r" % (f, getattr(self, f)) for f in self.FIELDS)


class _Handle:
    """An owned C handle, freed once by close(), the with-block or the collector."""
    _free = None
    _h = None

    def close(self):
        h, self._h = self._h, None
        if h:
            type(self)._free(h)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()

    def _handle(self):
        if not self._h:
            raise ValueError("clipdb: the %s is closed" % type(self).__name__)
        return self._h


class Database(_Handle):
    """An open clipdb database (a folder). Searches read it; the first ingest or reindex
    takes its one writer lock (lock_wait_ms: 0 fail at once when another writer holds it,
    > 0 wait up to, -1 wait for good), held until close."""
    _free = staticmethod(_c.close)

    def __init__(self, path, *, device=None, threads=0, lock_wait_ms=0):
        self._h = _open(_c.open, path, device, threads, lock_wait_ms)

    @classmethod
    def create(cls, path, model, **kwargs):
        """Creates the database folder path bound to the model at model (a model folder or
        a .safetensors file) and opens it."""
        _check(_c.create(_path(path), _path(model)))
        return cls(path, **kwargs)

    def _run(self, call, progress):
        """Runs call(progress_fn, report_ptr) with progress(label, done, total, errors)
        called as the run goes (a true return stops it); an exception the callable
        raises stops the run and is raised here."""
        raised = []

        def trampoline(ud, label, done, total, errors):
            try:
                return 1 if progress(label.decode(), done, total, errors) else 0
            except BaseException as e:  # stop the run; raised after it returns
                raised.append(e)
                return 1

        cb = _PROGRESS(trampoline) if progress else ctypes.cast(None, _PROGRESS)
        rep = _P()
        try:
            st = call(cb, ctypes.byref(rep))
            if raised:
                raise raised[0]
            _check(st)
            return Report(rep)
        finally:
            _c.report_free(rep)

    def ingest(self, paths, progress=None):
        """Ingests files and folders (walked recursively); returns a Report."""
        arr, n = _strings(paths, _path)
        h = self._handle()
        return self._run(lambda cb, rep: _c.ingest(h, arr, n, cb, None, rep), progress)

    def reindex(self, progress=None):
        """Rescans everything ever ingested (new, changed, moved, deleted files)."""
        h = self._handle()
        return self._run(lambda cb, rep: _c.reindex(h, cb, None, rep), progress)

    def index_build(self, type="auto", on_disk=False):
        """Builds the default model's index from the stored vectors and swaps it in
        (`clipdb index build`): type "auto", "flat", "hnsw", "ivf-sq", "ivf-pq" or
        "ivf-hnsw-pq"; on_disk: an IVF index's inverted lists in a file beside it, mapped
        by searches. Ingest and reindex keep the index fresh by themselves."""
        p = _c.index_params_new()
        if not p:
            raise MemoryError("clipdb: index parameters")
        try:
            _check(_c.index_params_set_type(p, str(type).encode()))
            _check(_c.index_params_set_on_disk(p, 1 if on_disk else 0))
            _check(_c.index_build(self._handle(), p))
        finally:
            _c.index_params_free(p)

    def search(self, text, k=10, under=None, min_score=None, taken_after=None,
               taken_before=None, camera=None, near=None, has_gps=False, sort=None,
               collapse=False):
        """The hits for text (the query language of `clipdb search`), best first: a list
        of Hit. under: a path or a list of paths (a hit is under any); min_score: drop
        hits scoring below; taken_after / taken_before: ISO 8601 dates or date-times
        (inclusive / exclusive); camera: a substring of the make or model; near:
        "LAT,LON,KM" or a (lat, lon, km) tuple; has_gps: only photos with a position;
        sort: "score", "time", "taken" or "taken-asc" (the best k, then ordered);
        collapse: copies (what `clipdb duplicates` groups as exact or near) are one hit,
        the best-ranked, with the others in Hit.copies, and k counts such hits, as
        `clipdb search` shows them (False, the default: every file)."""
        return _search([self], text, k, under, min_score, taken_after, taken_before, camera,
                       near, has_gps, sort, collapse)


def search(databases, text, k=10, under=None, min_score=None, taken_after=None,
           taken_before=None, camera=None, near=None, has_gps=False, sort=None,
           collapse=False):
    """One search over several open Databases (clipdb_search_text_many): the hits and
    scores one database holding all their photos would give, each Hit's .db the index
    of its database in databases. Their default models must have the same weights.
    The other arguments are Database.search's."""
    databases = list(databases)
    if not databases:
        raise ValueError("clipdb.search: no database")
    return _search(databases, text, k, under, min_score, taken_after, taken_before, camera,
                   near, has_gps, sort, collapse)


def _search(dbs, text, k, under, min_score, taken_after, taken_before, camera, near, has_gps,
            sort, collapse):
    p = _c.search_params_new()
    hits = _P()
    if not p:
        raise MemoryError("clipdb: search parameters")
    try:
        _check(_c.search_params_set_k(p, int(k)))
        if min_score is not None:
            _check(_c.search_params_set_min_score(p, float(min_score)))
        if under is not None:
            for u in [under] if isinstance(under, (str, bytes, os.PathLike)) else under:
                _check(_c.search_params_add_under(p, _path(u)))
        if isinstance(near, (tuple, list)):
            near = ",".join(repr(float(x)) for x in near)
        texts = [None if t is None else str(t).encode()
                 for t in (taken_after, taken_before, camera, near)]
        _check(_c.search_params_set_filter(p, *texts, 1 if has_gps else 0))
        if sort is not None:
            _check(_c.search_params_set_sort(p, sort.encode()))
        _check(_c.search_params_set_collapse(p, 1 if collapse else 0))
        if len(dbs) == 1:
            _check(_c.search_text(dbs[0]._handle(), text.encode(), p, ctypes.byref(hits)))
        else:
            arr = (_P * len(dbs))(*[d._handle() for d in dbs])
            _check(_c.search_text_many(arr, len(dbs), text.encode(), p, ctypes.byref(hits)))

        def text_of(fn, i):
            return (fn(hits, i) or b"").decode("utf-8", "surrogateescape")

        def copies_of(fn, i):
            return [fn(hits, i, j) for j in range(_c.hits_copies(hits, i))]
        return [Hit(_c.hits_id(hits, i), os.fsdecode(_c.hits_path(hits, i)),
                    _c.hits_score(hits, i), _c.hits_width(hits, i), _c.hits_height(hits, i),
                    text_of(_c.hits_taken, i), text_of(_c.hits_taken_source, i),
                    text_of(_c.hits_make, i), text_of(_c.hits_model, i), _c.hits_db(hits, i),
                    copies_of(_c.hits_copy_id, i), copies_of(_c.hits_copy_db, i))
                for i in range(_c.hits_count(hits))]
    finally:
        _c.hits_free(hits)
        _c.search_params_free(p)


class Model(_Handle):
    """A model (a model folder or a .safetensors file) loaded for embeddings: .dim, .name,
    embed_text(texts) and embed_image(paths), each an (n, dim) float32 numpy array,
    L2-normalized unless raw=True; the bits `clipdb embed` gives on the CPU."""
    _free = staticmethod(_c.model_close)

    def __init__(self, path, *, device=None, threads=0):
        self._h = _open(_c.model_open, path, device, threads)
        self.dim = _c.model_dim(self._h)
        self.name = _c.model_name(self._h).decode()

    def _embed(self, fn, arr, n, flags):
        out = np.zeros((n, self.dim), dtype=np.float32)
        _check(fn(self._handle(), arr, n, flags,
                  out.ctypes.data_as(ctypes.POINTER(ctypes.c_float))))
        return out

    def embed_text(self, texts, raw=False):
        arr, n = _strings(texts, str.encode)
        return self._embed(_c.embed_texts, arr, n, _EMBED_RAW if raw else 0)

    def embed_image(self, paths, raw=False, exif=True):
        arr, n = _strings(paths, _path)
        return self._embed(_c.embed_images, arr, n,
                           (_EMBED_RAW if raw else 0) | (0 if exif else _EMBED_NO_EXIF))
