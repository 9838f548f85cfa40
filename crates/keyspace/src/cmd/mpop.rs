//! LMPOP and ZMPOP: pop from the first of several keys that holds anything. They are also
//! the one step the blocking pops repeat (the listener's `blocking` turns BLPOP, BZPOPMIN,
//! BLMPOP, … into these and waits between tries).

use bytes::Bytes;
use ferry_resp::Reply;

use crate::args::{is, positive, syntax};
use crate::cmd::Outcome;
use crate::keys::{as_type, Keys};

/// The keys, the side (`first`: LEFT or MIN) and the count of `numkeys key … SIDE [COUNT n]`.
fn parse<'w>(words: &'w [Bytes], sides: [&str; 2]) -> Result<(&'w [Bytes], bool, usize), Reply> {
    let numkeys = positive(&words[1], "numkeys")?;
    if words.len() < 3 + numkeys {
        return Err(syntax());
    }
    let names = &words[2..2 + numkeys];
    let first = match &words[2 + numkeys] {
        side if is(side, sides[0]) => true,
        side if is(side, sides[1]) => false,
        _ => return Err(syntax()),
    };
    let count = match &words[3 + numkeys..] {
        [] => 1,
        [option, count] if is(option, "COUNT") => positive(count, "count")?,
        _ => return Err(syntax()),
    };
    Ok((names, first, count))
}

/// LMPOP numkeys key [key ...] LEFT|RIGHT [COUNT count]: `[key, [element ...]]`, or the
/// null array.
pub fn lmpop(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    let (names, left, count) = parse(words, ["LEFT", "RIGHT"])?;
    for name in names {
        if keys.read(name, as_type::list)?.is_none() {
            continue;
        }
        let popped = keys.pop(name, left, count)?.into_iter().map(Reply::Bulk).collect();
        return Ok(Reply::Array(vec![Reply::Bulk(name.clone()), Reply::Array(popped)]));
    }
    Ok(Reply::NullArray)
}

/// ZMPOP numkeys key [key ...] MIN|MAX [COUNT count]: `[key, [[member, score] ...]]`, or
/// the null array.
pub fn zmpop(keys: &mut Keys, words: &[Bytes]) -> Outcome {
    let (names, min, count) = parse(words, ["MIN", "MAX"])?;
    for name in names {
        if keys.read(name, as_type::zset)?.is_none() {
            continue;
        }
        let popped = crate::cmd::zset::pop_ends(keys, name, !min, count)?
            .into_iter()
            .map(|(score, member)| Reply::Array(vec![Reply::Bulk(member), Reply::Double(score)]))
            .collect();
        return Ok(Reply::Array(vec![Reply::Bulk(name.clone()), Reply::Array(popped)]));
    }
    Ok(Reply::NullArray)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::{Keys, Slot};

    fn words(text: &str) -> Vec<Bytes> {
        text.split(' ').map(|w| Bytes::from(w.to_owned())).collect()
    }

    fn run(keys: &mut Keys, text: &str) -> Reply {
        crate::run(&words(text), keys)
    }

    #[test]
    fn the_first_key_that_holds_anything_is_popped() {
        let mut slots = [Slot::new(Bytes::from("a"), None), Slot::new(Bytes::from("b"), None)];
        let mut keys = Keys::new(&mut slots, 0, 1, ferry_value::DEFAULT_ENCODINGS, true);
        run(&mut keys, "RPUSH b x y z");
        assert_eq!(
            run(&mut keys, "LMPOP 2 a b RIGHT COUNT 2"),
            Reply::Array(vec![
                Reply::text("b"),
                Reply::Array(vec![Reply::text("z"), Reply::text("y")])
            ])
        );
        assert_eq!(run(&mut keys, "LMPOP 1 a LEFT"), Reply::NullArray);
        run(&mut keys, "ZADD a 2 two 1 one");
        assert_eq!(
            run(&mut keys, "ZMPOP 2 a b MAX"),
            Reply::Array(vec![
                Reply::text("a"),
                Reply::Array(vec![Reply::Array(vec![Reply::text("two"), Reply::Double(2.0)])])
            ])
        );
        for bad in [
            "LMPOP 0 a LEFT",
            "LMPOP 1 a UP",
            "LMPOP 1 a LEFT COUNT 0",
            "LMPOP 3 a LEFT",
            "ZMPOP 1 a MIN COUNT",
        ] {
            assert!(matches!(run(&mut keys, bad), Reply::Error(_)), "{bad}");
        }
        // A key of another type is an error where it is met.
        assert!(matches!(run(&mut keys, "LMPOP 2 a b LEFT"), Reply::Error(e) if e.starts_with("WRONGTYPE")));
    }
}
