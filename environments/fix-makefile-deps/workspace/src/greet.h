#ifndef GREET_H
#define GREET_H

#define GREETING "Hello"

/* Writes "<GREETING>, <name>!" into buf (at most size bytes, always terminated). */
void greet(char *buf, unsigned long size, const char *name);

#endif
