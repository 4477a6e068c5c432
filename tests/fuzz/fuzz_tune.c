/* libFuzzer harness of the tuning table: the first byte chooses an
 * ARCOLL_TUNE rule string (core_tune_set) or a tune file's contents
 * (core_tune_file_parse_buf); the rest is the text. An accepted rule string
 * is rendered and must parse back to the same rules. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "arcoll.h"
#include "config/config.h"
#include "config/tune.h"
#include "util/log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static core_tune_t tab, again;
    static char rendered[CORE_TUNE_TEXT_MAX * 2];
    char *text;

    core_log_level = CORE_LOG_NONE;
    if (size == 0)
        return 0;
    if (data[0] & 1) {
        core_tune_file_parse_buf(&tab, "fuzz", data + 1, size - 1);
        return 0;
    }
    text = malloc(size);
    if (text == NULL)
        return 0;
    memcpy(text, data + 1, size - 1);
    text[size - 1] = '\0';
    /* Paths would read the file system: the file branch above covers their contents. */
    if (strncmp(text, "file:", 5) != 0 && text[0] != '/' && strncmp(text, "./", 2) != 0 &&
        core_tune_set(&tab, text) == ARCOLL_OK) {
        core_tune_get(&tab, rendered, sizeof(rendered));
        if (core_tune_set(&again, rendered) != ARCOLL_OK ||
            core_tune_digest(&again, 1) != core_tune_digest(&tab, 1))
            abort(); /* the canonical form must be accepted back (src/config/tune.h) */
    }
    free(text);
    return 0;
}
