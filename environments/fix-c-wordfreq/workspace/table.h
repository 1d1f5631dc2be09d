#ifndef TABLE_H
#define TABLE_H

#include <stddef.h>

struct entry {
    char *word;
    long count;
};

struct table {
    struct entry *entries;
    size_t len, cap;
};

void table_init(struct table *t);
/* Count one more occurrence of the first n bytes of word (copied). */
void table_add(struct table *t, const char *word, size_t n);
/* Sort by count, most frequent first, ties alphabetically. */
void table_sort(struct table *t);
void table_free(struct table *t);

#endif
