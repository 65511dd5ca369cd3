#!/usr/bin/env bash
# QAT study on the H200 (Vulkan): the main job's settings (1,200 steps, batch 16, seq 128, lr 3e-3) on the
# given presets, one run per variant; prints one line per run with the final validation loss and the share
# of fp32 masters outside the range their 4-bit codes follow. Usage (repository root, .gl/ and .devrun/
# carried): source bench/h200/env.sh; bash bench/h200/qat_variants.sh "mini small" "VARIANTS"
# A variant is NAME or NAME=FLAG,FLAG...: extra `edgetrain train` flags (commas become spaces); the name
# "fp32" trains --mode fp32. Example: "fp32 rescale100=--rescale-every,100 fixed=--rescale-every,0".
set -u
presets=${1:-mini small}
variants=${2:-fp32}
B=.devrun
mkdir -p /tmp/qat_runs
for preset in $presets; do
  for v in $variants; do
    name=${v%%=*}
    flags=""
    [[ $v == *=* ]] && flags=${v#*=}
    mode=qat
    [[ $name == fp32 ]] && mode=fp32
    out=/tmp/qat_runs/${preset}_$name
    rm -rf "$out"
    start=$SECONDS
    $B/edgetrain train --preset "$preset" --mode $mode --backend vulkan --steps 1200 --out "$out" \
      --no-progress --sample-tokens 0 ${flags//,/ } > "$out.log" 2>&1
    rc=$?
    secs=$((SECONDS - start))
    val=$(grep -o 'final validation loss [0-9.]*' "$out.log" | awk '{print $4}')
    info=$($B/edgetrain info "$out/checkpoint.safetensors" 2>/dev/null | grep '4-bit linears:')
    range=$(echo "$info" | grep -o '[0-9.]*% of masters outside' | awk '{print $1}')
    maxr=$(echo "$info" | grep -o 'max |w/s| [0-9.]*' | awk '{print $3}')
    printf '%-6s %-12s rc=%d val=%s outside=%s max_ratio=%s secs=%d flags=%s\n' "$preset" "$name" $rc "$val" \
      "${range:--}" "${maxr:--}" "$secs" "${flags:-none}" | tee -a "$OUT/qat_variants.txt"
    [[ $rc -ne 0 ]] && tail -5 "$out.log" >> "$OUT/qat_variants.txt"
  done
done
