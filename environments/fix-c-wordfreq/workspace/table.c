#include "table.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *xrealloc(void *p, size_t n)
{
    p = realloc(p, n);
    if (p == NULL) {
        perror("wordfreq");
        exit(1);
    }
    return p;
}

void table_init(struct table *t)
{
    t->entries = NULL;
    t->len = t->cap = 0;
}

void table_add(struct table *t, const char *word, size_t n)
{
    for (size_t i = 0; i < t->len; i++) {
        if (strlen(t->entries[i].word) == n && memcmp(t->entries[i].word, word, n) == 0) {
            t->entries[i].count++;
            return;
        }
    }
    if (t->len == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 64;
        t->entries = xrealloc(t->entries, t->cap * sizeof *t->entries);
    }
    char *copy = xrealloc(NULL, n + 1);
    memcpy(copy, word, n);
    copy[n] = '\0';
    t->entries[t->len].word = copy;
    t->entries[t->len].count = 1;
    t->len++;
}

static int by_count(const void *a, const void *b)
{
    const struct entry *x = a, *y = b;
    return (int)(y->count - x->count);
}

void table_sort(struct table *t)
{
    qsort(t->entries, t->len, sizeof *t->entries, by_count);
}

void table_free(struct table *t)
{
    for (size_t i = 0; i < t->len; i++)
        free(t->entries[i].word);
    free(t->entries);
    table_init(t);
}
