// A C++ worker whose thread bodies are lambdas inlined into libstdc++'s
// `std::thread::_State_impl<...>::_M_run`, with a template `consume` and
// its own lambda inlined into them (tests/perf_data.rs): perf names those
// frames `operator() (inlined)` and `_M_run (inlined)` by what binutils
// was asked before, and the function holding them by its ELF symbol.
//
//   cxx_thread_lambda [THREADS]
//
// Runs until killed. Build: g++ -O2 -g -pthread cxx_thread_lambda.cc -o
// cxx_thread_lambda.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <thread>
#include <vector>

static std::atomic<long> sink;

template <class F> inline long consume(const std::vector<long> &v, F f) {
    long s = 0;
    for (long x : v)
        s += f(x);
    return s;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? std::atoi(argv[1]) : 2;
    std::vector<std::thread> threads;
    for (int t = 0; t < n; t++)
        threads.emplace_back([t, argc] {
            std::vector<long> v(100000);
            for (size_t i = 0; i < v.size(); i++)
                v[i] = long((i * 2654435761u) % 1000) + t;
            for (;;) {
                long s = consume(v, [argc](long x) { return x * argc + 1; });
                std::sort(v.begin(), v.end(),
                          [](long a, long b) { return a % 97 < b % 97; });
                std::reverse(v.begin(), v.end());
                sink += s;
            }
        });
    for (auto &t : threads)
        t.join();
}
