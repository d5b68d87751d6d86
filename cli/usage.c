/*
** usage.c: the --help text of every clipdb command. These texts are the CLI's
** spec: tests/cli/golden/<command>.txt holds the expected output of
** `clipdb <command> --help`, so a change here is a deliberate, reviewed change.
** The first paragraph of each text ("usage: ..." lines) is also what a usage
** error prints.
*/
#include <string.h>

#include "cli/cli.h"

static const char help_main[] =
    "usage: clipdb <command> [options] [args]\n"
    "       clipdb --version | --help\n"
    "\n"
    "A photo search database with a built-in CLIP encoder.\n"
    "\n"
    "Database commands:\n"
    "  init        create a database bound to a model\n"
    "  ingest      add photos (folders or files) to the database\n"
    "  search      find the photos that best match a text or an image\n"
    "  reindex     rescan every ingested folder and apply the changes (nightly job)\n"
    "  folders     list the ingested folders and files, with counts and last scan\n"
    "  forget      remove a folder and its vectors from the database\n"
    "  move        tell the database that a folder moved (its vectors are kept)\n"
    "  index       build or describe the vector index (index build | index info)\n"
    "  stats       files by state, vectors per model, shards, index, disk use\n"
    "  verify      check that every file has exactly one valid vector\n"
    "  errors      list what could not be ingested or scanned, and why\n"
    "  export      write paths, ids and vectors out (npy or jsonl)\n"
    "  serve       a search page and a JSON API over HTTP, with thumbnails\n"

    "\n"
    "Encoder commands:\n"
    "  models      describe the model (by default the bundled one)\n"
    "  tokenize    print the token ids of texts\n"
    "  embed       compute embeddings of texts and images\n"
    "  preprocess  write the model's input tensor for an image (.npy)\n"
    "\n"
    "Other commands:\n"
    "  demo        generate a photo library, ingest it, search it, score the hits\n"
    "  help        show the help of a command (same as: clipdb <command> --help)\n"
    "  version     print the version and the compute backends\n"
    "\n"
    "Global options (before the command):\n"
    "  --db DIR      the database directory (default: $CLIPDB_DB, else ./clipdb)\n"
    "  -q, --quiet   no progress line\n"
    "  --log-time    start every stderr line with the local time (for cron logs)\n"
    "  -h, --help    show this help\n"
    "  --version     same as 'clipdb version'\n"
    "\n"
    "Environment:\n"
    "  CLIPDB_DB       database directory when --db is not given\n"
    "  CLIPDB_MODEL    model folder or .safetensors file when --model is not given\n"
    "  CLIPDB_DEVICE   auto, cpu, cuda or cuda:N when --device is not given\n"
    "  CLIPDB_THREADS  default number of threads\n"
    "  CLIPDB_LOG      log level on stderr: debug, info, warn (default), error, off\n"
    "  CLIPDB_LOG_TIME=1  same as --log-time\n"
    "  NO_COLOR        when set, no colors on stderr\n"
    "\n"
    "Exit status:\n"
    "  0    success\n"
    "  1    failure: the command could not do its job (also: its output could not\n"
    "       be written, e.g. a full disk)\n"
    "  2    usage error: unknown option, missing or bad argument\n"
    "  3    partial success: some files failed or wait for a retry, or a folder is\n"
    "       missing or unreadable (listed by 'clipdb errors')\n"
    "  130  interrupted (Ctrl-C): stopped after the current batch, work kept\n"
    "\n"
    "Run 'clipdb <command> --help' for the options of a command.\n";

static const char help_init[] =
    "usage: clipdb init [--db DIR] [--model PATH] [--thumb-size N]\n"
    "\n"
    "Creates an empty database in DIR, bound to a model: the model given, else\n"
    "$CLIPDB_MODEL, else the bundled default. Fails if DIR already holds one.\n"
    "\n"
    "Options:\n"
    "  --db DIR        where to create it (default: $CLIPDB_DB, else ./clipdb)\n"
    "  --model PATH    model folder or .safetensors file\n"
    "  --thumb-size N  long side of the thumbnails ingest makes for 'clipdb serve',\n"
    "                  in pixels: 32 to 512 (default: 384), or 0 for none\n"
    "  -q, --quiet     print nothing on success\n"
    "  -h, --help      show this help\n";

static const char help_ingest[] =
    "usage: clipdb ingest [options] PATH...\n"
    "\n"
    "Adds the images under each PATH (folders, walked recursively, or single\n"
    "files) to the database. Images are recognized by content as well as by\n"
    "extension. Unchanged files are skipped without being read, changed ones are\n"
    "re-encoded, moved ones (also between folders) keep their vectors, deleted ones\n"
    "are marked deleted. Files that look like images but cannot be used are\n"
    "recorded as errors; files that failed for a passing reason (permissions, I/O)\n"
    "are retried by the next run ('clipdb errors' lists both). Other files are\n"
    "skipped and counted, and so are hidden files and folders (names starting\n"
    "with '.') and the database's own folder.\n"
    "\n"
    "Each PATH becomes a recorded folder (or file), scanned again by 'clipdb\n"
    "reindex'. A PATH inside a recorded folder updates just that part of it; a\n"
    "folder holding recorded folders takes them over, vectors and all. A single\n"
    "file is recorded as itself, never its folder. Every model of the database\n"
    "gets the new photos' vectors.\n"
    "\n"
    "Options:\n"
    "  --db DIR              the database (default: $CLIPDB_DB, else ./clipdb)\n"
    "  --model PATH          also encode with this model (it joins the database;\n"
    "                        'clipdb models --default' makes it the default)\n"
    "  --device auto|cpu|cuda  where to run the encoder; cuda:N picks GPU N (default:\n"
    "                        $CLIPDB_DEVICE, else auto)\n"
    "  --batch N             images per encoder batch (default: 32)\n"
    "  --threads N           reader/decoder threads (default: the number of cores)\n"
    "  --follow-symlinks     follow symbolic links in these folders from now on\n"
    "                        (loops are detected; a link to a photo the database\n"
    "                        holds at its own path is not followed)\n"
    "  --no-follow-symlinks  stop following them\n"
    "  --no-exif             ignore EXIF orientation in these folders from now on\n"
    "  --exif                apply it again (the default)\n"
    "  --decode exact|fast   how the model's vector set decodes photos from now on:\n"
    "                        exact (the default: PIL's pixels) or fast (JPEG scaled in\n"
    "                        the DCT domain as PIL's draft, RAW previews); a change\n"
    "                        encodes the set again. 'clipdb stats' shows it\n"
    "  --wait                wait for another writer to finish instead of failing\n"
    "  --json                print the summary as JSON\n"
    "  -q, --quiet           no progress line\n"
    "  -h, --help            show this help\n"
    "\n"
    "Ctrl-C stops after the current batch; everything ingested so far is kept.\n"
    "Exit status: 0 all files processed, 3 some files failed or wait for a retry\n"
    "(see 'clipdb errors'), 1 the run failed (also when the disk is full: free\n"
    "space and rerun, nothing committed is lost), 130 interrupted.\n";

static const char help_search[] =
    "usage: clipdb search [options] QUERY...\n"
    "       clipdb search [options] --image PATH [QUERY...]\n"
    "\n"
    "Prints the images that best match the query, best first: one line per hit\n"
    "with the rank, the score (cosine similarity, 4 decimals) and the path.\n"
    "The words of QUERY are joined with spaces. Terms separated by ' + ' and ' - '\n"
    "are added and subtracted: \"beach + sunset - people\". A term may carry a\n"
    "weight: \"2*beach + sunset\". QUERY '-' reads the query text from standard\n"
    "input. The query text (all words and --not texts) is limited to 64 KiB; a\n"
    "longer one is a usage error.\n"
    "\n"
    "Options:\n"
    "  --db DIR           the database (default: $CLIPDB_DB, else ./clipdb)\n"
    "  -k N               number of hits (default: 10)\n"
    "  --image PATH       query by example image (repeatable; adds to the text)\n"
    "  --not TEXT         push results away from TEXT (repeatable)\n"
    "  --min-score S      drop hits scoring below S\n"
    "  --under PREFIX     only files in the folder PREFIX, or whose path starts\n"
    "                     with PREFIX (relative paths are taken from here);\n"
    "                     repeatable: files under any of them\n"
    "  --sort score|time  order hits by score (default) or by file time, newest first\n"
    "  --model PATH       the model whose vectors to search (default: the database's)\n"
    "  --device auto|cpu|cuda  where to run the encoder; cuda:N picks GPU N\n"
    "  --no-exif          ignore EXIF orientation of --image files\n"
    "  --json             print one JSON document\n"
    "  --paths            print bare paths, one per line\n"
    "  -0, --null         with --paths: end each path with NUL instead of newline\n"
    "  -h, --help         show this help\n"
    "\n"
    "Exit status: 0 (also when nothing matched), 1 failure, 2 usage error.\n";

static const char help_reindex[] =
    "usage: clipdb reindex [--db DIR] [--full] [--repair] [--model M] [options]\n"
    "\n"
    "The nightly job: rescans every folder ever ingested, encodes only what is\n"
    "new or changed, keeps the vectors of moved files, marks deleted files,\n"
    "retries the files that failed for a passing reason, brings every model's\n"
    "vectors up to date, then refreshes the indexes. Safe to run from cron (no\n"
    "terminal needed) and to rerun after a crash or kill. Prints a summary per\n"
    "model: added, changed, moved, deleted, errors, duration. A folder that is\n"
    "missing or empty (an unmounted drive) keeps its files and vectors, with one\n"
    "warning line, an entry in 'clipdb errors' and exit status 3.\n"
    "\n"
    "Options:\n"
    "  --db DIR              the database (default: $CLIPDB_DB, else ./clipdb)\n"
    "  --full                re-hash every file and rebuild the index from scratch\n"
    "  --repair              first check the database and the photos ('clipdb verify\n"
    "                        --deep') and re-encode what is missing, lost (a deleted\n"
    "                        or damaged shard), bad, or no longer matches its photo\n"
    "  --sample F            with --repair: the fraction of photos encoded again to\n"
    "                        compare (default: 0.05)\n"
    "  --model M             only this model's vectors (a number, name or hash)\n"
    "  --thumb-size N        change the thumbnails' long side (32 to 512 pixels, 0:\n"
    "                        none); this run makes the missing and resized ones\n"
    "  --decode exact|fast   change how the vector sets decode photos (see ingest)\n"
    "  --device auto|cpu|cuda  where to run the encoder; cuda:N picks GPU N\n"
    "  --batch N             images per encoder batch (default: 32)\n"
    "  --threads N           reader/decoder threads (default: the number of cores)\n"
    "  --wait                wait for another writer to finish instead of failing\n"
    "  --json                print the summary as JSON\n"
    "  -q, --quiet           no progress line\n"
    "  -h, --help            show this help\n"
    "\n"
    "Crontab example (every night at 03:00):\n"
    "  0 3 * * *  clipdb reindex --db /srv/photos.clipdb --quiet >>/var/log/clipdb.log 2>&1\n"
    "\n"
    "Exit status: 0 all files processed and every model's vectors complete, 3 some\n"
    "files failed or a model still lacks vectors (a warning names it), 1 the run\n"
    "failed (also when the disk is full: free space and rerun), 130 interrupted.\n";

static const char help_index[] =
    "usage: clipdb index build [--db DIR] [--model PATH] [--type TYPE]\n"
    "       clipdb index info [--db DIR] [--json]\n"
    "\n"
    "build: (re)builds the vector index of a model from the stored vectors and\n"
    "swaps it in atomically. 'auto' picks by size: exact (flat) for small\n"
    "databases, HNSW or IVF for large ones. Searches always re-rank exactly.\n"
    "A --type other than auto holds until the next ingest or reindex, which\n"
    "picks by size again (and rebuilds when its choice differs).\n"
    "info: the index of each model: type, vectors covered, size, age.\n"
    "\n"
    "Options:\n"
    "  --db DIR       the database (default: $CLIPDB_DB, else ./clipdb)\n"
    "  --model PATH   which model's index (default: the database's)\n"
    "  --type TYPE    auto (default), flat, hnsw, ivf-sq or ivf-pq\n"
    "  --json         print JSON (info)\n"
    "  -q, --quiet    no progress line\n"
    "  -h, --help     show this help\n";

static const char help_stats[] =
    "usage: clipdb stats [--db DIR] [--json]\n"
    "\n"
    "Files by state (ok, pending, error, deleted), vectors per model, shards,\n"
    "index type and coverage, disk use.\n"
    "\n"
    "Options:\n"
    "  --db DIR     the database (default: $CLIPDB_DB, else ./clipdb)\n"
    "  --json       print one JSON document\n"
    "  -h, --help   show this help\n";

static const char help_verify[] =
    "usage: clipdb verify [--db DIR] [--deep [--sample F]] [--json]\n"
    "\n"
    "Checks that every ok file has exactly one vector of the right size and unit\n"
    "norm, that no vector is orphaned, and that each index covers what it claims.\n"
    "With --deep it also reads every photo again, compares its bytes with what was\n"
    "stored, and encodes a sample again, comparing the vectors (within one fp16\n"
    "ulp). Prints the problems found, one per line, with the path; a shard file\n"
    "deleted or damaged behind clipdb's back is listed with every vector lost with\n"
    "it, then a count. Photos changed since the last scan are not problems (the\n"
    "next reindex updates them). 'clipdb reindex --repair' fixes what verify finds.\n"
    "Works on a database that is read-only for this user.\n"
    "\n"
    "Options:\n"
    "  --db DIR     the database (default: $CLIPDB_DB, else ./clipdb)\n"
    "  --deep       also check the photos (reads them all; loads the model)\n"
    "  --sample F   the fraction of photos encoded again (default: 0.05)\n"
    "  --json       print one JSON document\n"
    "  -q, --quiet  print nothing when all is well\n"
    "  -h, --help   show this help\n"
    "\n"
    "Exit status: 0 no problem, 1 problems found (or the check failed).\n";

static const char help_errors[] =
    "usage: clipdb errors [--db DIR] [--json]\n"
    "\n"
    "Lists what could not be ingested, one per line: path, tab, reason. First the\n"
    "files whose bytes cannot be used (truncated, corrupt, unsupported, too large):\n"
    "retried only when they change. Then the files that failed for a passing\n"
    "reason (permission, I/O, memory; the reason starts with 'will retry:'): the\n"
    "next run tries them again. Then what the scans could not read: folders\n"
    "without permission, broken symbolic links, missing folders.\n"
    "\n"
    "Options:\n"
    "  --db DIR     the database (default: $CLIPDB_DB, else ./clipdb)\n"
    "  --json       print one JSON document\n"
    "  -0, --null   end each line with NUL instead of newline\n"
    "  -h, --help   show this help\n";

static const char help_folders[] =
    "usage: clipdb folders [--db DIR] [--json]\n"
    "\n"
    "Lists the folders and single files ingested (the roots 'clipdb reindex'\n"
    "rescans), one per line: the status of the last scan (ok, missing, empty,\n"
    "unreadable, new), folder or file, files, vectors of the default model,\n"
    "problems ('clipdb errors'), the time of the last scan, the path.\n"
    "\n"
    "Options:\n"
    "  --db DIR     the database (default: $CLIPDB_DB, else ./clipdb)\n"
    "  --json       print one JSON document\n"
    "  -h, --help   show this help\n";

static const char help_forget[] =
    "usage: clipdb forget [--db DIR] PATH\n"
    "\n"
    "Removes a recorded folder or file (and every recorded folder inside PATH)\n"
    "from the database: its files and their vectors are deleted, the index is\n"
    "updated and the disk space is given back. The photos are not touched. PATH\n"
    "need not exist any more (a drive that is gone).\n"
    "\n"
    "Options:\n"
    "  --db DIR     the database (default: $CLIPDB_DB, else ./clipdb)\n"
    "  --wait       wait for another writer to finish instead of failing\n"
    "  -q, --quiet  print nothing on success\n"
    "  -h, --help   show this help\n";

static const char help_move[] =
    "usage: clipdb move [--db DIR] OLD NEW\n"
    "\n"
    "Tells the database that the photos of the recorded folder OLD (and of the\n"
    "recorded folders inside it) are now under NEW, e.g. after copying a library\n"
    "to another drive: the paths are rewritten and the vectors kept. NEW must\n"
    "exist and hold the files; OLD need not exist any more. The next 'clipdb\n"
    "reindex' checks the moved files (it reads them, it does not encode them).\n"
    "\n"
    "Options:\n"
    "  --db DIR     the database (default: $CLIPDB_DB, else ./clipdb)\n"
    "  --wait       wait for another writer to finish instead of failing\n"
    "  -q, --quiet  print nothing on success\n"
    "  -h, --help   show this help\n";

static const char help_export[] =
    "usage: clipdb export [--db DIR] [--model PATH] [--format npy|jsonl]\n"
    "                     [--dtype fp16|fp32] --out DIR\n"
    "\n"
    "Writes the vectors of every ok file with their ids and paths, so they can be\n"
    "used elsewhere. npy: DIR/vectors.npy (N x dim), DIR/ids.npy (int64),\n"
    "DIR/paths.txt (one per line, in the same order; a newline, carriage return\n"
    "or backslash in a name is written as \\n, \\r or \\\\) and DIR/paths0.txt (the\n"
    "exact bytes, each path followed by a NUL). jsonl: DIR/vectors.jsonl, one\n"
    "{\"id\", \"path\", \"vector\"} object per line, each stored fp16 value as a\n"
    "decimal of 9 significant digits (read as float32 or float16: the stored value).\n"
    "\n"
    "Options:\n"
    "  --db DIR             the database (default: $CLIPDB_DB, else ./clipdb)\n"
    "  --model PATH         which model's vectors (default: the database's)\n"
    "  --format npy|jsonl   output format (default: npy)\n"
    "  --dtype fp16|fp32    npy: fp16 exactly as stored (default), or fp32\n"
    "  --out DIR            output folder (created if needed)\n"
    "  -q, --quiet          no progress line\n"
    "  -h, --help           show this help\n";

static const char help_models[] =
    "usage: clipdb models [--model PATH] [--json]\n"
    "       clipdb models --db DIR [--json]\n"
    "       clipdb models [--db DIR] --default M\n"
    "\n"
    "Describes a model: where it was found, architecture, embedding size,\n"
    "tokenizer, preprocessing, weights. With no --model, the one clipdb uses by\n"
    "default ($CLIPDB_MODEL, else the bundled model, which only knows the\n"
    "generated shapes world). With --db: the models of a database and how many\n"
    "photos each has a vector for. --default M makes model M (a number, name or\n"
    "hash, as listed) the database's default, the one searches use, once it has\n"
    "a vector for every photo, as its shards confirm; otherwise it says how many\n"
    "photos lack one ('clipdb reindex --repair' completes the set).\n"
    "\n"
    "Options:\n"
    "  --model PATH   model folder or .safetensors file\n"
    "  --db DIR       a database (default: $CLIPDB_DB, else ./clipdb)\n"
    "  --default M    make M the database's default model\n"
    "  --json         print one JSON document\n"
    "  -h, --help     show this help\n";

static const char help_tokenize[] =
    "usage: clipdb tokenize [--model PATH] [--json] [--verbose] TEXT...\n"
    "\n"
    "Prints, for each TEXT, the token ids the text tower sees: start token, BPE\n"
    "ids, end token, zero padding to the model's context length (77 for CLIP).\n"
    "One line per text, ids separated by spaces. Only the model's tokenizer and\n"
    "shapes are read, not its weights: fast whatever the model's size.\n"
    "\n"
    "Options:\n"
    "  --model PATH   whose tokenizer (default: $CLIPDB_MODEL, else the bundled model)\n"
    "  --json         print one JSON document\n"
    "  --verbose      also print the cleaned text and each token's string\n"
    "  -h, --help     show this help\n";

static const char help_embed[] =
    "usage: clipdb embed [--model PATH] (--text TEXT | --image PATH)...\n"
    "                    [--format json|npy] [--raw] [--out FILE]\n"
    "\n"
    "Computes fp32 embeddings, one row per --text / --image in the order given,\n"
    "L2-normalized unless --raw. Images are encoded 32 at a time; each row has\n"
    "the same bytes as that image embedded alone.\n"
    "\n"
    "Options:\n"
    "  --model PATH           default: $CLIPDB_MODEL, else the bundled model\n"
    "  --text TEXT            a text to embed (repeatable)\n"
    "  --image PATH           an image file to embed (repeatable)\n"
    "  --format json|npy      json (default): {\"model\", \"dim\", \"embeddings\": [...]};\n"
    "                         npy: an N x dim float32 array (needs --out; - is stdout)\n"
    "  --raw                  do not L2-normalize\n"
    "  --out FILE             write to FILE instead of stdout (- is stdout)\n"
    "  --device auto|cpu|cuda where to run the encoder; cuda:N picks GPU N\n"
    "  --no-exif              ignore EXIF orientation\n"
    "  -h, --help             show this help\n";

static const char help_preprocess[] =
    "usage: clipdb preprocess [--model PATH] IMAGE --out FILE.npy [--no-exif]\n"
    "\n"
    "Decodes IMAGE and applies the model's preprocessing (bicubic resize of the\n"
    "short side, center crop, normalization), writing the 3 x H x W float32\n"
    "tensor the image tower sees as a .npy file. Only the model's configs and\n"
    "shapes are read, not its weights.\n"
    "\n"
    "Options:\n"
    "  --model PATH   default: $CLIPDB_MODEL, else the bundled model\n"
    "  --out FILE     the .npy file to write (- for standard output)\n"
    "  --no-exif      ignore EXIF orientation (as the reference CLIP does)\n"
    "  -h, --help     show this help\n";

static const char help_demo[] =
    "usage: clipdb demo [DIR] [options]\n"
    "\n"
    "Shows clipdb's whole job on a machine with nothing downloaded: generates a\n"
    "library of shape images with known captions in DIR (default: a new temporary\n"
    "folder), creates a database there, ingests it, builds the index, runs a few\n"
    "text queries, prints the hits with their scores and whether each truly\n"
    "matches, then the precision.\n"
    "\n"
    "Options:\n"
    "  --count N      images to generate (default: 500)\n"
    "  --seed N       world seed (default: 1)\n"
    "  -k N           hits shown per query (default: 5)\n"
    "  --model PATH   default: $CLIPDB_MODEL, else the bundled model\n"
    "  --threads N    decoder threads (default: the number of cores)\n"
    "  --device auto|cpu|cuda  where to run the encoder; cuda:N picks GPU N\n"
    "  -q, --quiet    no progress line\n"
    "  -h, --help     show this help\n";

static const char help_serve[] =
    "usage: clipdb serve [--db DIR] [--host ADDR] [--port N] [--threads N]\n"
    "                    [--token-file F] [options]\n"
    "\n"
    "Serves the database over HTTP: a search page at /, a JSON API (/api/search,\n"
    "/api/thumb/ID, /api/file/ID, /api/stats, /api/folders, /healthz) and\n"
    "clip-retrieval's /knn-service, /indices-list and /metadata. The model stays\n"
    "loaded; searches see what a running ingest or reindex commits, and an index\n"
    "another process rebuilds. Originals are served by catalog id only. One log line\n"
    "per request at info level (CLIPDB_LOG, default info here). Ctrl-C or SIGTERM\n"
    "stops it after the requests in flight.\n"
    "\n"
    "Options:\n"
    "  --db DIR           the database (default: $CLIPDB_DB, else ./clipdb)\n"
    "  --host ADDR        address to listen on (default: 127.0.0.1); any address\n"
    "                     that is not loopback needs --token-file\n"
    "  --port N           TCP port (default: 8765; 0 picks a free one)\n"
    "  --threads N        request threads (default: the number of cores)\n"
    "  --token-file F     file whose first line is the access token (16+ printable\n"
    "                     characters) that every request must carry, as\n"
    "                     'Authorization: Bearer TOKEN' or the page's sign-in\n"
    "  --cors-origin O    let pages from origin O call the API (e.g. clip-front)\n"
    "  --max-connections N  beyond N open connections requests get 503 (default: 256)\n"
    "  --timeout S        close connections idle for S seconds (default: 15)\n"
    "  --model PATH       search this model's vectors (default: the database's)\n"
    "  --device auto|cpu|cuda  where to run the encoder; cuda:N picks GPU N\n"
    "  -q, --quiet        no log line per request\n"
    "  -h, --help         show this help\n"
    "\n"
    "Exit status: 0 stopped by a signal, 1 failure (no database, address in use,\n"
    "no token for a public address), 2 usage error.\n";

static const char help_version[] =
    "usage: clipdb version\n"
    "       clipdb --version\n"
    "\n"
    "Prints clipdb's version, the CPU kernels in use and whether CUDA is built\n"
    "and usable.\n";

static const char help_help[] =
    "usage: clipdb help [COMMAND]\n"
    "\n"
    "Shows the help of COMMAND, or the list of commands.\n";

static const struct {
    const char *cmd;
    const char *text;
} g_help[] = {
    {"init", help_init},         {"ingest", help_ingest},   {"search", help_search},
    {"reindex", help_reindex},   {"index", help_index},     {"stats", help_stats},
    {"verify", help_verify},     {"errors", help_errors},   {"export", help_export},
    {"folders", help_folders},   {"forget", help_forget},   {"move", help_move},
    {"models", help_models},     {"tokenize", help_tokenize}, {"embed", help_embed},
    {"preprocess", help_preprocess}, {"demo", help_demo},   {"version", help_version},
    {"serve", help_serve},
    {"help", help_help},
};

const char *cdb_cli_help_text(const char *cmd) {
    if (!cmd) return help_main;
    for (size_t i = 0; i < sizeof g_help / sizeof g_help[0]; i++)
        if (!strcmp(g_help[i].cmd, cmd)) return g_help[i].text;
    return NULL;
}

void cdb_cli_print_usage_lines(FILE *f, const char *cmd) {
    const char *t = cdb_cli_help_text(cmd), *end;
    if (!t) t = help_main;
    end = strstr(t, "\n\n");
    fwrite(t, 1, end ? (size_t)(end - t) + 1 : strlen(t), f);
}
