#!/bin/bash
for v in base new; do
  cd /tmp/ci-$v
  /usr/bin/time -f "$v build wall %e user %U sys %S" -o /tmp/ab-$v-build.time scripts/build.sh > /tmp/ab-$v-build.log 2>&1
  (cd build && /usr/bin/time -f "$v ctest wall %e user %U sys %S" -o /tmp/ab-$v-ctest.time ctest -j2 --timeout 600 > /tmp/ab-$v-ctest.log 2>&1)
done
echo done > /tmp/ab.done
