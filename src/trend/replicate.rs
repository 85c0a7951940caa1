//! Which captures of a run are replicates of one query: the rule that
//! reads a capture directory's query name as a base query and a replicate
//! number. A name is `BASE SEP WORD N`, where SEP is `_`, `.` or `-`,
//! WORD is `iter`, `iteration`, `rep`, `repeat` or `run` (any case), N
//! is 1 to 6 digits and BASE is not empty: `Q3_iter1`, `q01.rep2`, `q5-run3`, `q7_iteration10`. Any other
//! name is a query of its own with one replicate (`q01`, `Q3_1`,
//! `warmup`).

/// The words that mark a replicate number.
const WORDS: [&str; 5] = ["iteration", "iter", "repeat", "rep", "run"];

/// (base query, replicate number) of a capture's query name; the name
/// itself and 1 when it names no replicate.
pub fn split(name: &str) -> (&str, u32) {
    let Some(cut) = name.rfind(['_', '.', '-']) else {
        return (name, 1);
    };
    let (base, tail) = (&name[..cut], &name[cut + 1..]);
    let digits = tail.trim_start_matches(|c: char| c.is_ascii_alphabetic());
    let word = &tail[..tail.len() - digits.len()];
    let is_word = WORDS.iter().any(|w| w.eq_ignore_ascii_case(word));
    if base.is_empty()
        || !is_word
        || digits.is_empty()
        || digits.len() > 6
        || !digits.bytes().all(|b| b.is_ascii_digit())
    {
        return (name, 1);
    }
    match digits.parse() {
        Ok(n) => (base, n),
        Err(_) => (name, 1),
    }
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
    fn other_names_are_queries_of_their_own() {
        for name in [
            "q01",
            "Q3_1",
            "warmup",
            "_iter1",
            "q1_iter",
            "q1_iterx",
            "q1_iter1234567",
            "q1_loop2",
            "q1_iter1a",
        ] {
            assert_eq!(split(name), (name, 1), "{name}");
        }
    }
}
