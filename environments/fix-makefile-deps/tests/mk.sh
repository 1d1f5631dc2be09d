#!/bin/bash
# mk.sh SCENARIO: checks one property of the workspace's Makefile, in a scratch copy of
# the workspace (so scenarios don't disturb each other or the agent's files).
set -u
scenario=$1
work=$(mktemp -d)
cp -a /workspace/. "$work/"
chown -R "$AGENT_USER" "$work"  # the agent's Makefile runs as the agent's user ($AS_AGENT)
cd "$work" || exit 1
fail() { echo "FAIL ($scenario): $*"; exit 1; }
quiet() { $AS_AGENT "$@" >"$work/.log" 2>&1 || { tail -15 "$work/.log"; return 1; }; }
# start from nothing the agent may have left built
$AS_AGENT make clean >/dev/null 2>&1
rm -rf build app

expect_output() {  # expect_output TEXT: ./app prints it
    [ -x ./app ] || fail "./app was not built"
    out=$(timeout 10 $AS_AGENT ./app)
    [ "$out" = "$1" ] || fail "./app printed '$out', expected '$1'"
}
age_everything() {  # sources at t0, everything the build made at t0+10s: all up to date
    find . -path ./.git -prune -o -type f -exec touch -d '2020-01-01 00:00:00' {} +
    find build -type f -exec touch -d '2020-01-01 00:00:10' {} +
    touch -d '2020-01-01 00:00:10' app
}

case "$scenario" in
fresh)  # `make -j4 app`, and a plain `make`, from a clean tree
    quiet make -j4 app || fail "make -j4 app failed on a clean tree"
    expect_output "Hello, World! (v1.4.2)"
    $AS_AGENT make clean >/dev/null 2>&1
    rm -rf build app
    quiet make -j4 || fail "make -j4 failed on a clean tree"
    expect_output "Hello, World! (v1.4.2)"
    ;;
noop)  # nothing to do right after a build
    quiet make app || fail "make app failed"
    $AS_AGENT make -q app || fail "make app is not up to date right after building it"
    quiet make || fail "make failed"
    $AS_AGENT make -q || fail "make (all) is not up to date right after building it"
    ;;
header)  # a header change rebuilds what includes it
    quiet make || fail "make failed"
    age_everything
    $AS_AGENT make -q app || fail "app should be up to date"
    sed -i 's/#define GREETING "Hello"/#define GREETING "Howdy"/' src/greet.h
    touch -d '2020-01-01 00:00:20' src/greet.h
    quiet make app || fail "rebuild failed"
    expect_output "Howdy, World! (v1.4.2)"
    ;;
version)  # a new VERSION regenerates version.h
    quiet make || fail "make failed"
    age_everything
    echo "2.0.0" > VERSION
    touch -d '2020-01-01 00:00:20' VERSION
    quiet make app || fail "rebuild failed"
    expect_output "Hello, World! (v2.0.0)"
    ;;
install)  # DESTDIR and PREFIX are honoured, nothing lands outside DESTDIR
    stage=$(mktemp -d)
    chown "$AGENT_USER" "$stage"
    # the agent may have run a plain `make install` itself: only changes made now count
    snapshot() { ls -l --time-style=full-iso /usr/local/bin /usr/local/share/man/man1 /opt 2>&1; }
    before=$(snapshot)
    quiet make || fail "make failed"
    quiet make install DESTDIR="$stage" PREFIX=/opt/greeter || fail "make install failed"
    [ -x "$stage/opt/greeter/bin/app" ] || fail "no executable \$DESTDIR/opt/greeter/bin/app"
    [ -f "$stage/opt/greeter/share/man/man1/app.1" ] || fail "no \$DESTDIR/opt/greeter/share/man/man1/app.1"
    [ "$(snapshot)" = "$before" ] || fail "make install wrote outside DESTDIR"
    [ "$($AS_AGENT "$stage/opt/greeter/bin/app" Ada)" = "Hello, Ada! (v1.4.2)" ] || fail "installed app prints the wrong thing"
    ;;
clean)  # clean removes everything the build made
    quiet make || fail "make failed"
    quiet make clean || fail "make clean failed"
    [ -e app ] && fail "app is still there after make clean"
    [ -e build ] && [ -n "$(ls -A build)" ] && fail "build/ still has $(ls build | head -3 | tr '\n' ' ')"
    [ -f src/main.c ] && [ -f src/greet.h ] && [ -f VERSION ] || fail "make clean removed sources"
    ;;
*)
    fail "unknown scenario"
    ;;
esac
echo "ok ($scenario)"
