/*
** test_sniff: encoder/'s one sniffer (cdb_image_sniff, cdb_image_mime,
** cdb_image_name_is_image) against PIL's own sniffing.
**
** sniff_make.py (next to this file) writes images of every format PIL writes and clipdb
** decodes, under names without an extension, plus files that are no image (random bytes,
** text that begins like an image), and says for each what PIL's Image.open makes of its
** content and PIL's MIME type for it. The one place the contract differs from PIL is
** TGA, which has no magic number: a loose sniff names it, a strict one (what the walker
** asks about a file whose name is no image's) and the MIME type do not. The real photos
** of the photo set (.deps/photos, when scripts/setup.sh fetched them) are sniffed too.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cdb_test.h"
#include "encoder/encoder.h"

static char g_dir[] = "/tmp/cdb_sniff_XXXXXX";

static unsigned char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    unsigned char *b = NULL;
    long k;
    *n = 0;
    if (!f) return NULL;
    if (fseek(f, 0, SEEK_END) == 0 && (k = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
        (b = malloc((size_t)k + 1)) && fread(b, 1, (size_t)k, f) == (size_t)k) {
        *n = (size_t)k;
    } else {
        free(b);
        b = NULL;
    }
    fclose(f);
    return b;
}

/* clipdb's name for a format PIL names, or NULL for one clipdb does not sniff. */
static const char *ours(const char *pil) {
    static const char *const map[][2] = {{"JPEG", "JPEG"}, {"PNG", "PNG"},   {"GIF", "GIF"},
                                         {"BMP", "BMP"},   {"PPM", "PNM"},   {"TGA", "TGA"},
                                         {"TIFF", "TIFF"}, {"WEBP", "WebP"}, {"PSD", "PSD"},
                                         {"MPO", "JPEG"}};
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (!strcmp(pil, map[i][0])) return map[i][1];
    return NULL;
}

static const char *str(const char *s) { return s ? s : "(none)"; }

CDB_TEST(content_sniffing_agrees_with_pil) {
    char cmd[1024], line[1024];
    FILE *p;
    int n_img = 0, n_not = 0;
    CHECK(mkdtemp(g_dir) != NULL);
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s/sniff_make.py %s 1", CDB_TEST_SRC, g_dir);
    CHECK((p = popen(cmd, "r")) != NULL);
    while (fgets(line, sizeof line, p)) {
        char *name = strtok(line, "\t\n"), *pil = strtok(NULL, "\t\n");
        char *mime = strtok(NULL, "\t\n");
        char path[1200];
        size_t n;
        unsigned char *b;
        if (!name || !pil || !mime) continue;
        snprintf(path, sizeof path, "%s/%s", g_dir, name);
        CHECK_MSG((b = slurp(path, &n)) != NULL || n == 0, "%s: cannot read", name);
        if (strcmp(pil, "-")) {
            const char *want = ours(pil);
            int tga = !strcmp(pil, "TGA");
            CHECK_MSG(want && !strcmp(str(cdb_image_sniff(b, n, 0)), want),
                      "%s: PIL says %s, clipdb %s", name, pil, str(cdb_image_sniff(b, n, 0)));
            CHECK_MSG(!strcmp(str(cdb_image_sniff(b, n, 1)), tga ? "(none)" : want),
                      "%s: PIL says %s, clipdb's strict sniff %s", name, pil,
                      str(cdb_image_sniff(b, n, 1)));
            CHECK_MSG(!strcmp(cdb_image_mime(b, n), tga ? "application/octet-stream" : mime),
                      "%s: PIL's MIME type %s, clipdb's %s", name, mime, cdb_image_mime(b, n));
            /* the first 32 bytes are enough, as the walker reads them */
            CHECK_MSG(!strcmp(str(cdb_image_sniff(b, n < 32 ? n : 32, 1)),
                              str(cdb_image_sniff(b, n, 1))),
                      "%s: the first 32 bytes sniff otherwise", name);
            n_img++;
        } else {
            CHECK_MSG(cdb_image_sniff(b, n, 1) == NULL, "%s: no image to PIL, %s to clipdb",
                      name, cdb_image_sniff(b, n, 1));
            CHECK_MSG(!strcmp(cdb_image_mime(b, n), "application/octet-stream"),
                      "%s: no image to PIL, %s to clipdb", name, cdb_image_mime(b, n));
            n_not++;
        }
        free(b);
    }
    CHECK_EQ_INT(pclose(p), 0);
    fprintf(stderr, "    %d images and %d other files sniffed as PIL does\n", n_img, n_not);
    CHECK(n_img >= 30 && n_not >= 40);
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    CHECK_EQ_INT(system(cmd), 0);
}

/* Every extension PIL registers for a format clipdb decodes is an image's name. */
CDB_TEST(image_names_cover_pils_extensions) {
    FILE *p = popen("/usr/bin/python3 -c \"from PIL import Image; "
                    "[print(e, f) for e, f in Image.registered_extensions().items()]\"",
                    "r");
    char line[256];
    int n = 0;
    CHECK(p != NULL);
    while (fgets(line, sizeof line, p)) {
        char *ext = strtok(line, " \n"), *fmt = strtok(NULL, " \n"), name[300], upper[300];
        if (!ext || !fmt || !ours(fmt) || !strcmp(fmt, "MPO")) continue;
        snprintf(name, sizeof name, "/photos/a%s", ext);
        CHECK_MSG(cdb_image_name_is_image(name), "%s (%s) is not an image's name", name, fmt);
        snprintf(upper, sizeof upper, "%s", name);
        for (char *c = upper; *c; c++)
            if (*c >= 'a' && *c <= 'z') *c = (char)(*c - 'a' + 'A');
        CHECK_MSG(cdb_image_name_is_image(upper), "%s is not an image's name", upper);
        n++;
    }
    CHECK_EQ_INT(pclose(p), 0);
    CHECK(n >= 10);
    CHECK(!cdb_image_name_is_image("/photos/notes.txt"));
    CHECK(!cdb_image_name_is_image("/photos/jpg"));
    CHECK(!cdb_image_name_is_image("/photos.jpg/readme"));
    CHECK(!cdb_image_name_is_image("/photos/a.jpg.part"));
}

/* The real photo set, when it is there: each sniffs as what PIL calls it. */
CDB_TEST(real_photos_sniff_as_pil_says) {
    const char *dir = CDB_SOURCE_DIR "/.deps/photos";
    char list[1200], cmd[1600], line[1400];
    FILE *p;
    int n = 0;
    snprintf(list, sizeof list, "%s/list.txt", dir);
    if (access(list, R_OK) != 0) {
        fprintf(stderr, "    no photo set in %s (scripts/setup.sh test fetches it)\n", dir);
        return;
    }
    /* list.txt: one absolute path a line; the answer: FORMAT<TAB>PATH */
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 -c \"from PIL import Image\n"
             "for l in open('%s'):\n"
             "  f = l.rstrip('\\n')\n"
             "  try: print(Image.open(f).format + '\\t' + f)\n"
             "  except Exception: pass\"", list);
    CHECK((p = popen(cmd, "r")) != NULL);
    while (fgets(line, sizeof line, p)) {
        char *fmt = strtok(line, "\t\n"), *file = strtok(NULL, "\t\n");
        size_t nb;
        unsigned char *b;
        if (!file || !fmt || !ours(fmt)) continue;
        if (!(b = slurp(file, &nb))) continue;
        CHECK_MSG(!strcmp(str(cdb_image_sniff(b, nb, 0)), ours(fmt)), "%s: PIL %s, clipdb %s",
                  file, fmt, str(cdb_image_sniff(b, nb, 0)));
        free(b);
        n++;
    }
    pclose(p);
    fprintf(stderr, "    %d real photos sniffed as PIL does\n", n);
}

CDB_TEST_MAIN(content_sniffing_agrees_with_pil, image_names_cover_pils_extensions,
              real_photos_sniff_as_pil_says)
