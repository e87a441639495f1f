#!/bin/bash
cd /tmp/ci-pch
/usr/bin/time -f "pch build wall %e user %U sys %S" -o /tmp/ab-pch-build.time scripts/build.sh > /tmp/ab-pch-build.log 2>&1
(cd build && /usr/bin/time -f "pch ctest wall %e user %U sys %S" -o /tmp/ab-pch-ctest.time ctest -j2 --timeout 600 > /tmp/ab-pch-ctest.log 2>&1)
for v in base pch; do
  cd /tmp/ci-$v
  /usr/bin/time -f "$v sanitize wall %e user %U sys %S" -o /tmp/ab-$v-san.time env BUILD_DIR=build-sanitize scripts/sanitize.sh > /tmp/ab-$v-san.log 2>&1
done
echo done > /tmp/ab2.done
