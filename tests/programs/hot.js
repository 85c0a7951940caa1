// A Node worker with two known hot functions (tests/jit.rs): `alpha` and
// `beta` share the time; `node --perf-basic-prof hot.js SECONDS`.
function alpha(n) {
  let s = 0;
  for (let i = 0; i < n; i++) {
    s = (s + ((i * 31) ^ (s >>> 3))) | 0;
  }
  return s;
}

function beta(n) {
  let s = 1;
  for (let i = 0; i < n; i++) {
    s = Math.imul(s, 1103515245) + i;
    s ^= s >>> 17;
  }
  return s;
}

const end = Date.now() + Number(process.argv[2]) * 1000;
let acc = 0;
console.log("started");
while (Date.now() < end) {
  acc = (acc + alpha(200000) + beta(200000)) | 0;
}
console.log(acc);
