// A C++ worker for `jobprof process perf.data` (tests/perf_data.rs): names
// that only a C++ demangler spells as perf does (namespaces, templates,
// lambdas, std::function, operators, const methods), libstdc++ frames
// (std::sort, std::map, std::string) and a thread pool.
//
//   cxx_worker [THREADS]
//
// Runs until killed. Build: g++ -O2 -g -fno-omit-frame-pointer -pthread
// cxx_worker.cc -o cxx_worker.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#define NI __attribute__((noinline))

namespace engine {

static volatile unsigned long sink;

template <typename T> struct Column {
    std::vector<T> values;
    NI T sum() const {
        T s{};
        for (const T &v : values)
            s += v;
        return s;
    }
};

struct Status {
    int code = 0;
};

NI Status sort_stage(Column<long> &c) {
    std::sort(c.values.begin(), c.values.end(),
              [](long a, long b) { return (a * 7919) % 10007 < (b * 7919) % 10007; });
    return Status{};
}

NI Status group_stage(const Column<long> &c) {
    std::map<long, long> groups;
    for (long v : c.values)
        groups[v % 97] += v;
    sink += groups.size();
    return Status{};
}

NI Status string_stage(int round) {
    std::string s;
    for (int i = 0; i < 2000; i++) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%d:%d;", round, i);
        s += buf;
    }
    sink += std::count(s.begin(), s.end(), ';');
    return Status{};
}

NI void run_task(const std::function<Status()> &task) {
    Status s = task();
    sink += static_cast<unsigned long>(s.code);
}

NI void worker(int id) {
    Column<long> c;
    for (int round = 0;; round++) {
        c.values.resize(20000);
        for (size_t i = 0; i < c.values.size(); i++)
            c.values[i] = static_cast<long>((i * 2654435761u + round + id) % 100003);
        run_task([&c] { return sort_stage(c); });
        run_task([&c] { return group_stage(c); });
        run_task([round] { return string_stage(round); });
        sink += static_cast<unsigned long>(c.sum());
    }
}

} // namespace engine

int main(int argc, char **argv) {
    int threads = argc > 1 ? std::atoi(argv[1]) : 2;
    std::vector<std::thread> pool;
    for (int i = 0; i < threads; i++)
        pool.emplace_back(engine::worker, i + 1);
    engine::worker(0);
}
