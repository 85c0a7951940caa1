//! Symbol names demangled exactly as perf 6.1 prints them. perf calls
//! libiberty's `cplus_demangle(name, DMGL_NO_OPTS)` (`c++filt -p -i`
//! prints the same): Rust v0 first, then Rust legacy, then C++ (GNU v3),
//! one rule per scheme ([`demangle`]). jobprof reads the names with
//! rustc-demangle and cpp_demangle (no C library) and writes them in
//! libiberty's spelling. tests/expected/demangle-corpus.tsv holds the
//! real names this is checked against (docs/symbols.md, "How names are
//! demangled").

use std::borrow::Cow;

/// Demangles a symbol name as perf 6.1 prints it; names of no scheme (C,
/// or names the scheme's demangler rejects) are returned unchanged.
///
/// - Rust v0 (`_R`): read up to the first `.` (`.1140`, `.llvm.123`
///   dropped), no crate disambiguators.
/// - Rust legacy (`_ZN...17h<hash>E`): the hash and any `.suffix` after
///   the `E` dropped ([`rust_legacy`]).
/// - C++ (`_Z`): no parameters, return type or qualifiers of the function
///   itself, whatever follows the encoding ignored (`.part.0`, `.cold`,
///   `.isra.0`, `.llvm.123`, `.lto_priv.0`), in libiberty's spelling
///   ([`libiberty_spelling`]); thunks and TLS functions in libiberty's
///   words ([`special_name`]).
pub fn demangle(name: &str) -> Cow<'_, str> {
    let demangled = if name.starts_with("_R") {
        rust_v0(name)
    } else if name.starts_with("_Z") {
        rust_legacy(name).or_else(|| cpp(name))
    } else {
        None
    };
    demangled.map_or(Cow::Borrowed(name), Cow::Owned)
}

/// A Rust v0 name: libiberty reads `_R`, an uppercase letter and
/// `[_0-9A-Za-z]` up to the first `.`, ignores the rest, and prints no
/// crate disambiguators (rustc-demangle's `{:#}`).
fn rust_v0(name: &str) -> Option<String> {
    let base = name.split('.').next().unwrap_or(name);
    let b = base.as_bytes();
    let valid = b.len() > 2
        && b[2].is_ascii_uppercase()
        && b.iter().all(|&c| c == b'_' || c.is_ascii_alphanumeric());
    if !valid {
        return None;
    }
    rustc_demangle::try_demangle(base)
        .ok()
        .map(|d| format!("{d:#}"))
}

/// A legacy Rust name, libiberty's rule (tried before C++, as libiberty
/// does): `_ZN` and only `[_0-9A-Za-z$.:@]`, ending in `E` or in `E.` and
/// a suffix (ignored), whose last path segment is `17h` and 16 lowercase
/// hex digits, at least 5 of them distinct; printed without the hash.
fn rust_legacy(name: &str) -> Option<String> {
    let chars_ok = name
        .bytes()
        .all(|c| c.is_ascii_alphanumeric() || b"_$.:@".contains(&c));
    if !name.starts_with("_ZN") || !chars_ok {
        return None;
    }
    let end = if name.ends_with('E') {
        name.len()
    } else {
        name.rfind("E.")? + 1
    };
    let base = &name[..end];
    let segment = &base[base.len().checked_sub(20)?..base.len() - 1];
    let digits = segment.strip_prefix("17h")?;
    let lower_hex = digits
        .bytes()
        .all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'));
    let seen = digits.chars().filter_map(|c| c.to_digit(16));
    let distinct = seen.fold(0u16, |set, d| set | 1 << d).count_ones();
    if !lower_hex || distinct < 5 {
        return None;
    }
    rustc_demangle::try_demangle(base)
        .ok()
        .map(|d| format!("{d:#}"))
}

/// The longest C++ name libiberty demangles: it sizes its component array
/// at twice the name's length and refuses, for want of stack, any name that
/// needs more than `DEMANGLE_RECURSION_LIMIT` (2048) components (PR 87675;
/// perf passes no `DMGL_NO_RECURSE_LIMIT`), clone suffix included. perf
/// prints longer names mangled.
const LIBIBERTY_MAX_LEN: usize = 1024;

/// A C++ name as libiberty prints it without `DMGL_PARAMS`.
fn cpp(name: &str) -> Option<String> {
    if name.len() > LIBIBERTY_MAX_LEN {
        return None;
    }
    if let Some((words, target)) = special_name(name) {
        let s = cpp_text(&format!("_Z{target}"), words.params)?;
        return Some(format!(
            "{}{}",
            words.text,
            libiberty_spelling(&s, words.params)
        ));
    }
    let s = cpp_text(name, false)?;
    Some(libiberty_spelling(&s, false))
}

/// The words libiberty writes before a special function's target.
struct Words {
    text: &'static str,
    /// Whether the target is printed with its parameters (a thunk's is,
    /// even without `DMGL_PARAMS`: it is not the top-level encoding).
    params: bool,
}

/// A thunk (`_ZTh`, `_ZTv`, `_ZTc`) or TLS function (`_ZTH`, `_ZTW`):
/// libiberty's words and the target's mangling after `_Z`, its call
/// offsets skipped. cpp_demangle spells these `{virtual override
/// thunk(...)}`.
fn special_name(name: &str) -> Option<(Words, &str)> {
    let rest = name.strip_prefix("_ZT")?;
    let (text, offsets, after) = match rest.as_bytes().first()? {
        b'h' => ("non-virtual thunk to ", 1, rest),
        b'v' => ("virtual thunk to ", 1, rest),
        b'c' => ("covariant return thunk to ", 2, &rest[1..]),
        b'H' => ("TLS init function for ", 0, &rest[1..]),
        b'W' => ("TLS wrapper function for ", 0, &rest[1..]),
        _ => return None,
    };
    let mut target = after;
    for _ in 0..offsets {
        target = call_offset(target)?;
    }
    let params = offsets > 0;
    Some((Words { text, params }, target))
}

/// Skips one `<call-offset>`: `h <number> _` or `v <number> _ <number> _`.
fn call_offset(s: &str) -> Option<&str> {
    match s.as_bytes().first()? {
        b'h' => offset_number(&s[1..]),
        b'v' => offset_number(&s[1..]).and_then(offset_number),
        _ => None,
    }
}

/// Skips `[n] <digits> _`.
fn offset_number(s: &str) -> Option<&str> {
    let s = s.strip_prefix('n').unwrap_or(s);
    let digits = s.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return None;
    }
    s[digits..].strip_prefix('_')
}

/// How deep cpp_demangle may recurse reading and printing a name. Its
/// defaults (96 and 128) turn away real names that libiberty prints
/// (gRPC's nested promise combinators, under 1024 characters); libiberty
/// itself stops at 2048 and 1024. These depths need well under 1 MiB of
/// stack.
const PARSE_DEPTH: u32 = 256;
const PRINT_DEPTH: u32 = 512;

/// cpp_demangle's text of the encoding at the start of `name` (what
/// follows it ignored, as libiberty does without `DMGL_PARAMS`), without
/// parameters and return type unless `params`.
fn cpp_text(name: &str, params: bool) -> Option<String> {
    // No C++ identifier holds a `.`: the first starts a clone suffix, which
    // libiberty reads only at the top with parameters on.
    let name = name.split('.').next().unwrap_or(name);
    let parse = cpp_demangle::ParseOptions::default().recursion_limit(PARSE_DEPTH);
    let (sym, _) =
        cpp_demangle::BorrowedSymbol::with_tail_and_options(name.as_bytes(), &parse).ok()?;
    let opts = cpp_demangle::DemangleOptions::new().recursion_limit(PRINT_DEPTH);
    let opts = if params {
        opts
    } else {
        opts.no_params().no_return_type()
    };
    sym.demangle_with_options(&opts).ok()
}

/// The integer literal types libiberty prints as a suffix (its
/// `D_PRINT_UNSIGNED`, `_LONG`, ...: `0ul`) where cpp_demangle prints a
/// cast (`(unsigned long)0`); `int` is bare in both, other types are casts
/// in both.
const LITERAL_SUFFIXES: [(&str, &str); 5] = [
    ("(unsigned long long)", "ull"),
    ("(long long)", "ll"),
    ("(unsigned long)", "ul"),
    ("(unsigned int)", "u"),
    ("(long)", "l"),
];

/// The qualifiers of a function itself, after its parameters.
const FUNCTION_QUALIFIERS: [&str; 4] = [" const", " volatile", " &&", " &"];

/// cpp_demangle's text in libiberty's spelling, where the two differ:
/// integer literals of [`LITERAL_SUFFIXES`]' types; empty template
/// argument packs at the end of a list, after which libiberty takes back
/// the `", "` it wrote (`std::__invoke<void (*)()>`, not
/// `<void (*)(), >`); `decltype(nullptr)` for `std::nullptr_t` (`Dn`);
/// and, without `params`, no qualifiers of the function itself.
fn libiberty_spelling(s: &str, params: bool) -> String {
    let mut out = String::with_capacity(s.len() + 16);
    let mut rest = s;
    while !rest.is_empty() {
        if let Some(after) = respell(&mut out, rest) {
            rest = after;
            continue;
        }
        let c = rest.chars().next().unwrap_or_default();
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    if !params {
        while let Some(q) = FUNCTION_QUALIFIERS.into_iter().find(|q| out.ends_with(q)) {
            out.truncate(out.len() - q.len());
        }
    }
    out
}

/// Where the text at the start of `rest` is an integer literal, empty
/// trailing packs (or their expansions) or `std::nullptr_t`, writes libiberty's spelling of it
/// to `out` and returns what follows.
fn respell<'a>(out: &mut String, rest: &'a str) -> Option<&'a str> {
    for (cast, suffix) in LITERAL_SUFFIXES {
        if let Some(after) = rest.strip_prefix(cast) {
            let sign = usize::from(after.starts_with('-'));
            let digits = after[sign..].bytes().take_while(u8::is_ascii_digit).count();
            if digits > 0 {
                out.push_str(&after[..sign + digits]);
                out.push_str(suffix);
                return Some(&after[sign + digits..]);
            }
        }
    }
    if rest.starts_with(", ") {
        // Empty packs at the end of a list printed nothing after their
        // commas (one in the middle keeps its comma in libiberty too); an
        // empty pack's expansion as a reference, `DpOT_`, is nothing either
        // (cpp_demangle writes its `&&`).
        let mut after = rest;
        while let Some(next) = after.strip_prefix(", ") {
            after = ["const&", "&&", "&"]
                .into_iter()
                .find_map(|r| next.strip_prefix(r))
                .unwrap_or(next);
        }
        return after.starts_with(['>', ')']).then_some(after);
    }
    let after = rest.strip_prefix("std::nullptr_t")?;
    let whole =
        !out.ends_with(|c: char| c == ':' || is_name_char(c)) && !after.starts_with(is_name_char);
    whole.then(|| {
        out.push_str("decltype(nullptr)");
        after
    })
}

/// Whether `c` can be part of a C++ identifier.
fn is_name_char(c: char) -> bool {
    c == '_' || c.is_ascii_alphanumeric()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spelled(s: &str) -> String {
        libiberty_spelling(s, false)
    }

    #[test]
    fn spelling_as_libiberty() {
        // `Dn`: libiberty's builtin name, not the typedef.
        assert_eq!(
            demangle("_ZNSt15_Sp_counted_ptrIDnLN9__gnu_cxx12_Lock_policyE2EE10_M_disposeEv"),
            "std::_Sp_counted_ptr<decltype(nullptr), (__gnu_cxx::_Lock_policy)2>::_M_dispose"
        );
        assert_eq!(spelled("f<std::nullptr_t>"), "f<decltype(nullptr)>");
        // An empty pack's expansion as a reference parameter (`DpOT0_`)
        // prints nothing in libiberty, its comma taken back.
        assert_eq!(
            demangle("_ZN5arrow8internal6FnOnceIFvRKNS_6StatusEEE6FnImplIZNS0_8Executor6SubmitISt8functionIFS2_vEEJENS_6FutureINS0_5EmptyEEEEENS_6ResultIT1_EENS0_9TaskHintsENS_9StopTokenEOT_DpOT0_EUt_ED0Ev"),
            "arrow::internal::FnOnce<void (arrow::Status const&)>::FnImpl<arrow::internal::Executor::Submit<std::function<arrow::Status ()>, , arrow::Future<arrow::internal::Empty> >(arrow::internal::TaskHints, arrow::StopToken, std::function<arrow::Status ()>&&)::{unnamed type#1}>::~FnImpl"
        );
        assert_eq!(spelled("f<int, const&, &>(a, &&)::x"), "f<int>(a)::x");
        assert_eq!(
            spelled("f(char const (&) [29])::x"),
            "f(char const (&) [29])::x"
        );
        assert_eq!(spelled("f<(unsigned long)0>"), "f<0ul>");
        assert_eq!(spelled("f<(long)-3, (unsigned int)7>"), "f<-3l, 7u>");
        assert_eq!(
            spelled("f<(long long)1, (unsigned long long)2>"),
            "f<1ll, 2ull>"
        );
        // Other types keep their cast, as in libiberty; int is bare.
        assert_eq!(spelled("f<(char)65, 3>"), "f<(char)65, 3>");
        assert_eq!(spelled("f<(unsigned long)x>"), "f<(unsigned long)x>");
        assert_eq!(spelled("g<int, >"), "g<int>");
        assert_eq!(spelled("g<int, , >"), "g<int>");
        assert_eq!(spelled("g<int, , char>"), "g<int, , char>");
        assert_eq!(spelled("h(int, )"), "h(int)");
        assert_eq!(spelled("a::b<c, d>"), "a::b<c, d>");
        assert_eq!(
            spelled("f()::{lambda(int)#1}::operator() const"),
            "f()::{lambda(int)#1}::operator()"
        );
        assert_eq!(spelled("a::operator&"), "a::operator&");
    }

    /// Each scheme as perf 6.1 prints it: libiberty's
    /// `cplus_demangle(name, DMGL_NO_OPTS)`, checked with `c++filt -p -i`
    /// (names from polars, pyarrow and rustup; more in
    /// tests/expected/demangle-corpus.tsv).
    #[test]
    fn demangles_every_scheme_as_libiberty() {
        // Rust v0: libiberty stops at the first `.`.
        assert_eq!(
            demangle("_RNvMNtCs44jY8KtKzz4_5alloc6stringNtB2_6String4push.3027"),
            "<alloc::string::String>::push"
        );
        assert_eq!(
            demangle("_RNvCsgz5bu763Jej_13polars_config26OOC_DRIFT_THRESHOLD_ATOMIC.0"),
            "polars_config::OOC_DRIFT_THRESHOLD_ATOMIC"
        );
        // Rust legacy: any `.suffix` after the closing `E` is dropped.
        assert_eq!(
            demangle("_ZN3std3sys2io11kernel_copy5linux15sendfile_splice12HAS_SENDFILE17h9ca2a4f0a8a422cdE.0"),
            "std::sys::io::kernel_copy::linux::sendfile_splice::HAS_SENDFILE"
        );
        assert_eq!(
            demangle("_ZN78_$LT$rustup..dist..manifest..TargetedPackage$u20$as$u20$core..clone..Clone$GT$5clone17hb547cfe6f013d392E.4050"),
            "<rustup::dist::manifest::TargetedPackage as core::clone::Clone>::clone"
        );
        // A hash of fewer than 5 distinct digits is not Rust's: C++ reads it.
        assert_eq!(
            demangle("_ZN3foo17h0000000000000000E"),
            "foo::h0000000000000000"
        );
        // C++: function types in template arguments, a space before `(`.
        assert_eq!(
            demangle("_ZNSt17_Function_handlerIFllEZ4mainEUllE_E9_M_invokeERKSt9_Any_dataOl"),
            "std::_Function_handler<long (long), main::{lambda(long)#1}>::_M_invoke"
        );
        assert_eq!(
            demangle("_ZN5arrow16MappingGeneratorISt10shared_ptrINS_11RecordBatchEESt8functionIFNS_6FutureIS3_EEvEEE8CallbackclERKNS_6ResultIS3_EE.cold"),
            "arrow::MappingGenerator<std::shared_ptr<arrow::RecordBatch>, std::function<arrow::Future<std::shared_ptr<arrow::RecordBatch> > ()> >::Callback::operator()"
        );
        // ... but not before a local name's function parameters.
        assert_eq!(
            demangle("_ZN5arrow8internal6FnOnceIFvvEE6FnImplISt5_BindIFNS_6detail14ContinueFutureENS_6FutureINS0_5EmptyEEEZZN7parquet5arrow14FileWriterImpl16WriteRecordBatchERKNS_11RecordBatchEENKUlllE_clEllEUliE_iEEED0Ev"),
            "arrow::internal::FnOnce<void ()>::FnImpl<std::_Bind<arrow::detail::ContinueFuture (arrow::Future<arrow::internal::Empty>, parquet::arrow::FileWriterImpl::WriteRecordBatch(arrow::RecordBatch const&)::{lambda(long, long)#1}::operator()(long, long) const::{lambda(int)#1}, int)> >::~FnImpl"
        );
        // Thunks: libiberty's words, the target with its parameters, no
        // clone suffix.
        assert_eq!(
            demangle("_ZThn8_N4Impl2goEl"),
            "non-virtual thunk to Impl::go(long)"
        );
        assert_eq!(
            demangle("_ZTv0_n64_NK5arrow2io18BufferOutputStream6closedEv.localalias.lto_priv.0"),
            "virtual thunk to arrow::io::BufferOutputStream::closed() const"
        );
        // Whatever follows a C++ encoding is ignored.
        assert_eq!(
            demangle("_Z41__static_initialization_and_destruction_0v.lto_priv.2.cold"),
            "__static_initialization_and_destruction_0"
        );
    }

    #[test]
    fn lambda_parameters_of_class_type_as_libiberty() {
        // Arrow's thread-pool callbacks: the lambda's own parameter list
        // stays its own, the operator()'s follows the operator (cpp_demangle
        // 0.5.1 printed `{lambda(arrow::Result<int>(arrow::Result<int>))#1}
        // ::operator()`; patched in vendor/cpp_demangle).
        assert_eq!(
            demangle("_ZNSt17_Function_handlerIFN5arrow6StatusEvEZZNS0_5acero12_GLOBAL__N_110SourceNode14StartProducingEvENUlNS0_6ResultIiEEE_clES7_EUlvE_E9_M_invokeERKSt9_Any_data.lto_priv.0"),
            "std::_Function_handler<arrow::Status (), arrow::acero::(anonymous namespace)::SourceNode::StartProducing()::{lambda(arrow::Result<int>)#1}::operator()(arrow::Result<int>)::{lambda()#1}>::_M_invoke"
        );
        assert_eq!(
            demangle("_ZZZN1a1fEvENUlN1b1cEE_clES1_ENKUlvE_clEv"),
            "a::f()::{lambda(b::c)#1}::operator()(b::c)::{lambda()#1}::operator()"
        );
    }

    #[test]
    fn a_reference_to_a_nested_type_whose_prefix_is_a_substitution() {
        // `ONS7_14CallbackRecordE`: `&&` applies to the whole nested name;
        // cpp_demangle 0.5.1 let the prefix (`S7_`, itself a nested name)
        // print it (`arrow::FutureImpl&&::CallbackRecord`; patched in
        // vendor/cpp_demangle), on every Arrow thread-pool stack.
        assert_eq!(
            demangle("_ZN5arrow8internal6FnOnceIFvvEE6FnImplIZNS_18ConcreteFutureImpl21RunOrScheduleCallbackERKSt10shared_ptrINS_10FutureImplEEONS7_14CallbackRecordEbEUlvE_E6invokeEv"),
            "arrow::internal::FnOnce<void ()>::FnImpl<arrow::ConcreteFutureImpl::RunOrScheduleCallback(std::shared_ptr<arrow::FutureImpl> const&, arrow::FutureImpl::CallbackRecord&&, bool)::{lambda()#1}>::invoke"
        );
    }

    /// Issue 57's Velox names (pyvelox 0.2.0's libvelox.so), as
    /// `c++filt -p -i` 2.40 prints them; each fixed in vendor/cpp_demangle.
    #[test]
    fn velox_names_as_libiberty() {
        // A reference to a pointer to member function, and one returned by
        // the function type of a `std::_Bind`: the class stays whole.
        assert_eq!(
            demangle("_ZSt13__invoke_implIvRMN5folly18ThreadPoolExecutorEFvSt10shared_ptrINS1_6ThreadEEERPS1_JRS4_EET_St21__invoke_memfun_derefOT0_OT1_DpOT2_"),
            "std::__invoke_impl<void, void (folly::ThreadPoolExecutor::*&)(std::shared_ptr<folly::ThreadPoolExecutor::Thread>), folly::ThreadPoolExecutor*&, std::shared_ptr<folly::ThreadPoolExecutor::Thread>&>"
        );
        assert_eq!(
            demangle("_ZN5folly6detail8function13DispatchSmall4execISt5_BindIFMNS_18ThreadPoolExecutorEFvSt10shared_ptrINS5_6ThreadEEEPS5_S8_EEEEmNS1_2OpEPNS1_4DataESG_"),
            "folly::detail::function::DispatchSmall::exec<std::_Bind<void (folly::ThreadPoolExecutor::*(folly::ThreadPoolExecutor*, std::shared_ptr<folly::ThreadPoolExecutor::Thread>))(std::shared_ptr<folly::ThreadPoolExecutor::Thread>)> >"
        );
        // folly's local closures: an `sr` of a `std::` class template and
        // an empty template argument list (`result<>`), once left mangled.
        assert_eq!(
            demangle("_ZZN5folly6detail17distributed_mutex16DistributedMutexISt6atomicLb1EE12lock_combineIZNS_16ThrottledLifoSem21maybeStartWakingChainEvEUlvE_EENS_13invoke_detail6traitsIRKT_E6resultIEESA_ENKUlvE_clEv"),
            "folly::detail::distributed_mutex::DistributedMutex<std::atomic, true>::lock_combine<folly::ThrottledLifoSem::maybeStartWakingChain()::{lambda()#1}>(folly::ThrottledLifoSem::maybeStartWakingChain()::{lambda()#1})::{lambda()#1}::operator()"
        );
        assert_eq!(
            demangle("_ZZN5folly2toIbEENSt9enable_ifIXntsrSt7is_sameINS_5RangeIPKcEET_E5valueES7_E4typeES6_ENKUlNS_4UnitEE0_clESB_"),
            "folly::to<bool>(folly::Range<char const*>)::{lambda(folly::Unit)#2}::operator()"
        );
        // A standard substitution's destructor: libiberty's full name.
        assert_eq!(
            demangle("_ZTv0_n24_NSoD1Ev"),
            "virtual thunk to std::basic_ostream<char, std::char_traits<char> >::~basic_ostream()"
        );
        // A closure's destructor takes the last source name read.
        assert_eq!(
            demangle("_ZZN5arrow18ConcreteFutureImpl21RunOrScheduleCallbackERKSt10shared_ptrINS_10FutureImplEEONS2_14CallbackRecordEbENUlvE_D1Ev"),
            "arrow::ConcreteFutureImpl::RunOrScheduleCallback(std::shared_ptr<arrow::FutureImpl> const&, arrow::FutureImpl::CallbackRecord&&, bool)::{lambda()#1}::~CallbackRecord"
        );
        // A pack expansion of references: the pattern for each element.
        assert_eq!(
            demangle("_ZN5folly12small_vectorINS_5RangeIPKcEELm1EvE16makeSizeInternalIZNS5_12emplace_backIJRS3_lEEERS4_DpOT_EUlPvE_EEvmbOT_m"),
            "folly::small_vector<folly::Range<char const*>, 1ul, void>::makeSizeInternal<folly::small_vector<folly::Range<char const*>, 1ul, void>::emplace_back<char const*&, long>(char const*&, long&&)::{lambda(void*)#1}>"
        );
        // libiberty leaves these mangled, so perf does: a substitution
        // printed inside two prints of itself, and a name over 1024
        // characters.
        let looping = "_ZN8facebook5velox4bits10forEachBitIZNS0_4exec7EvalCtx22applyToSelectedNoThrowIZNKS3_21SimpleFunctionAdapterINS0_4core9UDFHolderINS0_9functions11ChrFunctionINS3_10VectorExecEEESB_NS0_7VarcharENS0_15ConstantCheckerIJlEEEJlEEEE8applyUdfIZNKSH_7iterateIJNS3_12VectorReaderIlEEEEEvRNSH_12ApplyContextEDpRT_EUlRT_RT0_T1_E1_EEvSN_SR_EUlSR_E_ZNKSI_ISW_EEvSN_SR_EUlSR_E0_EEvRKNS0_17SelectivityVectorESR_ST_EUlSR_E_EEvPKmiibSR_";
        assert_eq!(demangle(looping), looping);
        let long = format!("_ZN1a{}1bEv", "3foo".repeat(260));
        assert_eq!(demangle(&long), long);
    }

    #[test]
    fn demangles_cpp_and_rust() {
        assert_eq!(demangle("main"), "main");
        // As perf prints it (DMGL_NO_OPTS): no parameters, no return type.
        assert_eq!(demangle("_ZN3foo3barEv"), "foo::bar");
        assert_eq!(
            demangle("_ZN4work9sort_someImEEvRSt6vectorIT_SaIS2_EE"),
            "work::sort_some<unsigned long>"
        );
        // An `sr` expression in a SFINAE return type (read as libiberty
        // reads it, vendor/cpp_demangle).
        assert_eq!(
            demangle("_ZSt4swapImENSt9enable_ifIXsrSt6__and_IJSt6__not_ISt15__is_tuple_likeIT_EESt21is_move_constructibleIS4_ESt18is_move_assignableIS4_EEE5valueEvE4typeERS4_SE_"),
            "std::swap<unsigned long>"
        );
        // libiberty's spelling of non-int literals and empty packs.
        assert_eq!(
            demangle("_ZNSt6thread8_InvokerISt5tupleIJPFvvEEEE9_M_invokeIJLm0EEEEvSt12_Index_tupleIJXspT_EEE"),
            "std::thread::_Invoker<std::tuple<void (*)()> >::_M_invoke<0ul>"
        );
        assert_eq!(
            demangle("_ZSt8__invokeIPFvvEJEENSt15__invoke_resultIT_JDpT0_EE4typeEOS3_DpOS4_"),
            "std::__invoke<void (*)()>"
        );
        assert_eq!(
            demangle("_ZN4core3ptr13drop_in_place17h0123456789abcdefE"),
            "core::ptr::drop_in_place"
        );
        assert_eq!(
            demangle(
                "_ZN3std2rt10lang_start28_$u7b$$u7b$closure$u7d$$u7d$17he6d2b21b4b406f0dE.llvm.4347963086496554761"
            ),
            "std::rt::lang_start::{{closure}}"
        );
    }
}
