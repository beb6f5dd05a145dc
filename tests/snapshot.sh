#!/usr/bin/env bash
# Every output of the CLI for the reference blueprints, into one new folder, so that a change
# meant to change no behaviour can show it: snapshot before, snapshot after, `diff -r`.
#   tests/snapshot.sh OUT   (OUT must not exist; CLUSTERPRINT names the command to run,
#                            default .venv/bin/clusterprint of this checkout)
# Each command's stdout, stderr and exit status are OUT/NAME.{stdout,stderr,rc}; each
# blueprint's render is OUT/NAME.rendered/. Paths in the outputs are relative, so two
# snapshots in different folders compare equal.
set -u
cd "$(dirname "$0")/.."
[ $# -eq 1 ] || { echo "usage: $0 OUT" >&2; exit 2; }
out=$1
cp=$(realpath "${CLUSTERPRINT:-.venv/bin/clusterprint}")
root=$PWD
mkdir "$out" || exit 2
out=$(realpath "$out")
run() {  # run NAME COMMAND...
    local name=$1; shift
    "$@" >"$out/$name.stdout" 2>"$out/$name.stderr"
    echo $? >"$out/$name.rc"
}
run version "$cp" --version
run schema "$cp" schema
run validate-all "$cp" validate blueprints/*.yaml
run validate-all-json "$cp" validate --format json blueprints/*.yaml
for bp in blueprints/*.yaml; do
    name=$(basename "$bp" .yaml)
    run "$name.validate" "$cp" validate "$bp"
    # Rendered from inside OUT, so the folder it reports writing is relative.
    (cd "$out" && run "$name.render" "$cp" render "$root/$bp" --out "$name.rendered")
    run "$name.plan" "$cp" plan "$bp"
    run "$name.plan-json" "$cp" plan --json "$bp"
    run "$name.plan-policy" "$cp" plan --policy "$bp"
done
run diff-cpu-small-a3mega "$cp" diff blueprints/cpu-small.yaml blueprints/a3mega.yaml
run diff-a3ultra-a4-json "$cp" diff --json blueprints/a3ultra.yaml blueprints/a4.yaml
echo "$out: $(find "$out" -type f | wc -l) files"
