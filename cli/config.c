/*
** config.c: where things are. The database: --db, then $CLIPDB_DB, then ./clipdb.
** The model: --model, then $CLIPDB_MODEL (either may be hf:ORG/NAME: cmd_hub.c), then
** the bundled default, which is the
** first folder (by name) under the data folder "models" that cdb_data_path()
** finds: <prefix>/share/clipdb/models next to an installed clipdb, else the source
** tree's models/ (a clipdb run from its build folder). The device: --device, then
** $CLIPDB_DEVICE, then auto, spelled as kernels' one parser (cdb_k_device_parse)
** reads it. Whether a database's model is the bundled one: by its weights hash.
*/
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"

static const char *g_global_db;

void cdb_cli_set_global_db(const char *dir) { g_global_db = dir; }
int cdb_cli_global_db_given(void) { return g_global_db && *g_global_db; }

const char *cdb_cli_db_path(const char *flag_value, const char **source) {
    const char *env = getenv("CLIPDB_DB");
    const char *src = "default", *path = "clipdb";
    if (flag_value && *flag_value) {
        src = "--db";
        path = flag_value;
    } else if (g_global_db && *g_global_db) {
        src = "--db";
        path = g_global_db;
    } else if (env && *env) {
        src = "CLIPDB_DB";
        path = env;
    }
    if (source) *source = src;
    return path;
}

static int is_dir(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static int not_hidden_dir(const struct dirent *e) { return e->d_name[0] != '.'; }

/* The first subfolder of dir by name into buf; 0 if found. */
static int first_subdir(const char *dir, char *buf, size_t size) {
    struct dirent **list = NULL;
    int n = scandir(dir, &list, not_hidden_dir, alphasort), found = -1;
    for (int i = 0; i < n; i++) {
        if (found < 0) {
            int len = snprintf(buf, size, "%s/%s", dir, list[i]->d_name);
            if (len > 0 && (size_t)len < size && is_dir(buf)) found = 0;
        }
        free(list[i]);
    }
    free(list);
    return found;
}

/* The bundled default model's folder into buf; NULL when there is none. */
static const char *bundled_path(char *buf, size_t size) {
    char models[4096];
    if (cdb_data_path("models", models, sizeof models, NULL) &&
        first_subdir(models, buf, size) == 0)
        return buf;
    return NULL;
}

const char *cdb_cli_model_path(const char *flag_value, const char **source) {
    static char buf[4096];
    const char *env = getenv("CLIPDB_MODEL");
    const char *dummy;
    if (!source) source = &dummy;
    if (flag_value && *flag_value) {
        *source = "--model";
        return flag_value;
    }
    if (env && *env) {
        *source = "CLIPDB_MODEL";
        /* hf:ORG/NAME: the cached snapshot (fetched when missing); on failure the error
        ** is printed and the command goes on without a model */
        return cdb_cli_resolve_model(env, "CLIPDB_MODEL");
    }
    *source = "bundled default";
    if (bundled_path(buf, sizeof buf)) return buf;
    *source = "none";
    return NULL;
}

int cdb_cli_model_is_bundled(cdb_engine *e, int64_t model_id) {
    char path[4096];
    cdb_engine_model m;
    int found;
    if (!bundled_path(path, sizeof path)) return 0;
    found = cdb_engine_find_model(e, path, &m) == CDB_OK; /* by its weights hash */
    cdb_clearerr(); /* not in the database: not an error of the command */
    return found && m.id == model_id;
}

int cdb_cli_device(const char *cmd, const char *flag_value, cdb_k_device *out) {
    const char *env = getenv("CLIPDB_DEVICE"), *v = "auto", *from = "";
    if (flag_value && *flag_value) v = flag_value;
    else if (env && *env) v = env, from = "$CLIPDB_DEVICE: ";
    if (cdb_k_device_parse(v, out) != CDB_OK)
        return cdb_cli_usage_error(cmd, "%s%s", from, cdb_errmsg());
    return CLI_EXIT_OK;
}
