//! The one replicate convention: which query names are replicates of one
//! query. `jobprof-record` suggests names by it, and `jobprof`'s job views,
//! `diff` and `trend` group captures by it.
//!
//! The spelling to use is the old pipeline's, `BASE_iterN` (`Q1_iter1`,
//! `Q1_iter2`, ...; [`next_name`]). Also read as replicate N of BASE:
//! `BASE SEP WORD N`, where SEP is `_`, `.` or `-` and WORD is `iter`,
//! `iteration`, `rep`, `repeat` or `run` (any case): `q01.rep2`, `q5-run3`,
//! `q7_iteration10`; and `BASE.N` (a `.` and digits only: `q01.2`, which
//! older `jobprof-record`s suggested). N is 1 to 6 digits and BASE is not
//! empty. Any other name is a query of its own, replicate 1 (`q01`, `Q3_1`,
//! `q01-2`, `warmup`); a name without a number (`q01`) and `q01_iter1` are
//! both replicate 1 of `q01`.

/// The words that mark a replicate number.
const WORDS: [&str; 5] = ["iteration", "iter", "repeat", "rep", "run"];

/// The most digits a replicate number has.
const MAX_DIGITS: usize = 6;

/// (base query, replicate number) of a capture's query name; the name
/// itself and 1 when it names no replicate.
pub fn split(name: &str) -> (&str, u32) {
    let Some(cut) = name.rfind(['_', '.', '-']) else {
        return (name, 1);
    };
    let (base, sep, tail) = (&name[..cut], &name[cut..=cut], &name[cut + 1..]);
    let digits = tail.trim_start_matches(|c: char| c.is_ascii_alphabetic());
    let word = &tail[..tail.len() - digits.len()];
    let marked = if word.is_empty() {
        // `q01.2`: digits alone after a `.` only (`Q3_1` is a query).
        sep == "."
    } else {
        WORDS.iter().any(|w| w.eq_ignore_ascii_case(word))
    };
    if base.is_empty()
        || !marked
        || digits.is_empty()
        || digits.len() > MAX_DIGITS
        || !digits.bytes().all(|b| b.is_ascii_digit())
    {
        return (name, 1);
    }
    match digits.parse() {
        Ok(n) => (base, n),
        Err(_) => (name, 1),
    }
}

/// The name of the replicate to run after a capture named `name`, in the
/// primary spelling: `q01` -> `q01_iter2`, `Q1_iter3` -> `Q1_iter4`,
/// `q01.2` -> `q01_iter3`.
pub fn next_name(name: &str) -> String {
    let (base, n) = split(name);
    format!("{base}_iter{}", n.saturating_add(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replicate_names_split() {
        assert_eq!(split("Q3_iter1"), ("Q3", 1));
        assert_eq!(split("Q3_iter12"), ("Q3", 12));
        assert_eq!(split("q01.rep2"), ("q01", 2));
        assert_eq!(split("q5-run3"), ("q5", 3));
        assert_eq!(split("q7_ITERATION10"), ("q7", 10));
        assert_eq!(split("tpch.q1_repeat4"), ("tpch.q1", 4));
    }

    #[test]
    fn a_dot_and_digits_is_a_replicate() {
        assert_eq!(split("q01.2"), ("q01", 2));
        assert_eq!(split("tpch.q1.12"), ("tpch.q1", 12));
    }

    #[test]
    fn other_names_are_queries_of_their_own() {
        for name in [
            "q01",
            "Q3_1",
            "q01-2",
            "warmup",
            "_iter1",
            ".2",
            "q1_iter",
            "q1_iterx",
            "q1_iter1234567",
            "q1.1234567",
            "q1_loop2",
            "q1_iter1a",
            "q1.2a",
        ] {
            assert_eq!(split(name), (name, 1), "{name}");
        }
    }

    #[test]
    fn the_next_name_is_the_primary_spelling() {
        assert_eq!(next_name("q01"), "q01_iter2");
        assert_eq!(next_name("Q1_iter1"), "Q1_iter2");
        assert_eq!(next_name("Q1_iter9"), "Q1_iter10");
        assert_eq!(next_name("q01.2"), "q01_iter3");
        assert_eq!(next_name("q01.rep4"), "q01_iter5");
        assert_eq!(next_name("Q3_1"), "Q3_1_iter2");
    }
}
