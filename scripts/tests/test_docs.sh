#!/usr/bin/env bash
# Every relative link of the Markdown pages (README, docs/, dev/, scripts/) names a file that
# exists, and every anchor a heading of its page (scripts/tools/check_md_links.py); and the
# checker itself finds a broken anchor, a missing file, a link one folder too shallow and a
# repeated heading's suffix too many.
source "$(dirname "$0")/testlib.sh"
check=scripts/tools/check_md_links.py
mapfile -t pages < <(git ls-files '*.md' 2>/dev/null)
[ ${#pages[@]} -gt 0 ] || mapfile -t pages < <(find . -name '*.md' -not -path './.venv/*' -not -path './build/*' -not -path './data/*')
if out=$(python3 "$check" "${pages[@]}" 2>&1); then
    pass "the ${#pages[@]} Markdown pages' relative links and anchors resolve"
else
    fail "Markdown links" "$(printf '%s' "$out" | head -n 5 | tr '\n' ' ')"
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/docs" "$tmp/dev/cpu"
printf '# Speed\n\n## bf16 (`--precision bf16`)\n\n## Runs\n\n## Runs\n\n<a name="table"></a>\n' > "$tmp/docs/speed.md"
printf '[ok](../../docs/speed.md#bf16---precision-bf16) [ok](../../docs/speed.md#runs-1) [ok](../../docs/speed.md#table)\n' > "$tmp/dev/cpu/good.md"
expect_ok "check_md_links passes good links (a heading with code, a repeated heading, an HTML anchor)" python3 "$check" "$tmp/dev/cpu/good.md"
for bad in '../../docs/speed.md#bf16-precision-bf16' '../docs/speed.md#runs' '../../docs/sped.md' '../../docs/speed.md#runs-2'; do
    printf 'text [a link](%s) text\n' "$bad" > "$tmp/dev/cpu/bad.md"
    if out=$(python3 "$check" "$tmp/dev/cpu/bad.md" 2>&1); then
        fail "check_md_links finds the broken link $bad" "it passed"
    elif printf '%s' "$out" | grep -qF "bad.md:1: $bad"; then
        pass "check_md_links finds the broken link $bad"
    else
        fail "check_md_links finds the broken link $bad" "it said: $out"
    fi
done
