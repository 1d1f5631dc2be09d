/* wordfreq: the N most frequent words of standard input (see README.md). */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>

#include "table.h"

static int usage(void)
{
    fputs("usage: wordfreq [N]\n", stderr);
    return 2;
}

int main(int argc, char **argv)
{
    long n = 10;
    if (argc > 2)
        return usage();
    if (argc == 2) {
        char *end;
        n = strtol(argv[1], &end, 10);
        if (*argv[1] == '\0' || *end != '\0' || n <= 0)
            return usage();
    }

    struct table t;
    table_init(&t);
    char *buf = NULL;
    size_t len = 0, cap = 0;
    int c;
    while ((c = getchar()) != EOF) {
        if (isalpha(c)) {
            if (len + 1 >= cap) {
                cap = cap ? 2 * cap : 32;
                buf = realloc(buf, cap);
                if (buf == NULL) {
                    perror("wordfreq");
                    return 1;
                }
            }
            buf[len++] = (char)c;
        } else if (len > 0) {
            table_add(&t, buf, len);
            len = 0;
        }
    }

    table_sort(&t);
    for (size_t i = 0; i < t.len && i < (size_t)n; i++)
        printf("%ld %s\n", t.entries[i].count, t.entries[i].word);
    table_free(&t);
    free(buf);
    return 0;
}
