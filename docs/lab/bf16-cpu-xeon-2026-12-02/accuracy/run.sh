#!/bin/bash
# issue 49 item 3: fp32 vs bf16 accuracy, code at /tmp/acc (main 9e07494), run serially, 2 threads
cd /tmp/accruns
PY=/work/main/.venv/bin/python
run() { # name args...
  local name=$1; shift
  [ -f $name/summary.json ] && return
  echo "$(date -u +%FT%T) start $name" >> log.txt
  PYTHONPATH=/tmp/acc/src nice -n 5 $PY -m plif train --dataset fashion-mnist --data-dir /usr/share/datasets/fashion-mnist \
     --device cpu --out $name --restart "$@" > $name.out 2>&1
  echo "$(date -u +%FT%T) end $name rc=$?" >> log.txt
}
for s in 0 1 2; do
  run cpu-s$s-fp32 --preset cpu --epochs 2 --seed $s --amp none
  run cpu-s$s-bf16 --preset cpu --epochs 2 --seed $s --amp bf16
done
for s in 0 1; do
  run paper-s$s-bf16 --preset paper --epochs 1 --seed $s --amp bf16
  run paper-s$s-fp32 --preset paper --epochs 1 --seed $s --amp none
done
echo done >> log.txt
