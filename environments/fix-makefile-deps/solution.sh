#!/bin/bash
set -euo pipefail
cat > Makefile <<'MK'
CC ?= cc
CFLAGS ?= -O2 -Wall
PREFIX ?= /usr/local
DESTDIR ?=

OBJ = build/main.o build/greet.o

all: app

app: $(OBJ)
	$(CC) $(CFLAGS) -o $@ $(OBJ)

# -MMD -MP: each object also depends on the headers it includes (build/*.d)
build/%.o: src/%.c | build
	$(CC) $(CFLAGS) -MMD -MP -Ibuild -Isrc -c -o $@ $<

# main.c includes the generated header: it must exist before main.o is compiled
build/main.o: build/version.h

build/version.h: VERSION | build
	echo '#define APP_VERSION "'"$$(cat VERSION)"'"' > $@

build:
	mkdir -p build

install: app
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man1
	install -m 755 app $(DESTDIR)$(PREFIX)/bin/app
	install -m 644 app.1 $(DESTDIR)$(PREFIX)/share/man/man1/app.1

clean:
	rm -rf app build

-include $(OBJ:.o=.d)

.PHONY: all install clean
MK
make -j4 app && ./app && make clean
