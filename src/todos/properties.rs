//! Property tests of the argument validators: every string, id, date and tag list within
//! the published limits is accepted and comes back as sent; every one outside them is
//! refused with its field named.

use proptest::prelude::*;
use serde_json::{Map, Value, json};

use super::schema::MAX_SAFE_INTEGER;
use super::{ToolError, add_task, complete_task, delete_task, list_tasks, search_tasks};

/// A string of `min..=max` UTF-16 code units of any characters but NUL (which the store
/// decides about), control characters and characters outside the BMP (two units each)
/// included.
fn text_within(min: usize, max: usize) -> impl Strategy<Value = String> {
    prop::collection::vec(
        any::<char>().prop_filter("no NUL", |c| *c != '\0'),
        min..=max,
    )
    .prop_map(move |chars| {
        let mut text: String = chars.into_iter().collect();
        while text.encode_utf16().count() > max {
            text.pop();
        }
        text
    })
    .prop_filter("long enough", move |t| t.encode_utf16().count() >= min)
}

/// A string of more than `max` UTF-16 code units.
fn text_over(max: usize) -> impl Strategy<Value = String> {
    prop::collection::vec(any::<char>(), max + 1..max + 40)
        .prop_map(|chars| chars.into_iter().collect())
}

/// Control characters: C0 but NUL, DEL and C1.
fn controls(max: usize) -> impl Strategy<Value = String> {
    let control = prop_oneof![
        (1u32..0x20).prop_map(|c| char::from_u32(c).unwrap()),
        Just('\u{7f}'),
        (0x80u32..0xa0).prop_map(|c| char::from_u32(c).unwrap()),
    ];
    prop::collection::vec(control, 1..=max).prop_map(|chars| chars.into_iter().collect())
}

fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

/// The refusal names `field`, and says why in the message.
fn names<T: std::fmt::Debug>(result: Result<T, ToolError>, field: &str) -> bool {
    match result {
        Ok(value) => panic!("accepted: {value:?}"),
        Err(error) => error.message.contains(&format!("{field}: ")),
    }
}

proptest! {
    #[test]
    fn a_title_within_200_units_is_taken_as_sent(title in text_within(1, 200)) {
        let todo = add_task::parse(&object(json!({ "title": title }))).unwrap();
        prop_assert_eq!(todo.title, title);
    }

    #[test]
    fn a_title_over_200_units_is_refused_by_name(title in text_over(200)) {
        let named = names(add_task::parse(&object(json!({ "title": title }))), "title");
        prop_assert!(named, "the field is not named");
    }

    #[test]
    fn units_not_characters_are_counted(count in 101usize..=200, c in prop::char::range('\u{10000}', '\u{10ffff}')) {
        // As many characters as the limit allows, but twice as many UTF-16 code units.
        let title: String = std::iter::repeat_n(c, count).collect();
        let named = names(add_task::parse(&object(json!({ "title": title }))), "title");
        prop_assert!(named, "the field is not named");
    }

    #[test]
    fn control_characters_within_the_limits_are_kept_as_they_are(text in controls(40)) {
        let args = object(json!({ "title": text, "tags": [text] }));
        let todo = add_task::parse(&args).unwrap();
        prop_assert_eq!(&todo.title, &text);
        prop_assert_eq!(todo.tags, vec![text.clone()]);
        prop_assert_eq!(search_tasks::parse(&object(json!({ "query": text }))).unwrap(), text);
    }

    #[test]
    fn up_to_ten_tags_within_40_units_are_taken_in_order(
        tags in prop::collection::vec(text_within(1, 40), 0..=10)
    ) {
        let todo = add_task::parse(&object(json!({ "title": "t", "tags": tags }))).unwrap();
        prop_assert_eq!(todo.tags, tags);
    }

    #[test]
    fn a_tag_over_40_units_is_refused_by_its_index(
        tags in prop::collection::vec(text_within(1, 40), 0..5),
        long in text_over(40),
        at in 0usize..5,
    ) {
        let mut tags = tags;
        let at = at.min(tags.len());
        tags.insert(at, long);
        let args = object(json!({ "title": "t", "tags": tags }));
        let named = names(add_task::parse(&args), &format!("tags[{at}]"));
        prop_assert!(named, "the field is not named");
    }

    #[test]
    fn more_than_ten_tags_are_refused(count in 11usize..40) {
        let args = object(json!({ "title": "t", "tags": vec!["x"; count] }));
        let named = names(add_task::parse(&args), "tags");
        prop_assert!(named, "the field is not named");
    }

    #[test]
    fn a_query_or_a_tag_filter_within_the_limits_is_taken_as_sent(
        query in text_within(1, 200),
        tag in text_within(1, 40),
    ) {
        let found = search_tasks::parse(&object(json!({ "query": query }))).unwrap();
        prop_assert_eq!(found, query);
        let filter = list_tasks::parse(&object(json!({ "filter": { "tag": tag } }))).unwrap();
        prop_assert_eq!(filter.tag, Some(tag));
    }

    #[test]
    fn a_query_or_a_tag_filter_over_the_limits_is_refused_by_name(
        query in text_over(200),
        tag in text_over(40),
    ) {
        let named = names(search_tasks::parse(&object(json!({ "query": query }))), "query");
        prop_assert!(named, "the field is not named");
        let args = object(json!({ "filter": { "tag": tag } }));
        let named = names(list_tasks::parse(&args), "filter.tag");
        prop_assert!(named, "the field is not named");
    }

    #[test]
    fn every_safe_positive_id_is_taken_whole_or_as_a_float(id in 1..=MAX_SAFE_INTEGER) {
        let whole = object(json!({ "id": id }));
        prop_assert_eq!(complete_task::parse(&whole).unwrap(), id);
        let float = object(json!({ "id": id as f64, "confirm": true }));
        prop_assert_eq!(delete_task::parse(&float).unwrap(), id);
    }

    #[test]
    fn an_id_out_of_range_is_refused_by_name(
        id in prop_oneof![i64::MIN..=0, MAX_SAFE_INTEGER + 1..=i64::MAX]
    ) {
        let named = names(complete_task::parse(&object(json!({ "id": id }))), "id");
        prop_assert!(named, "the field is not named");
    }

    #[test]
    fn every_calendar_date_is_a_due_date_and_no_other_day_is(
        year in 0i32..=9999,
        month in 1u8..=12,
        day in 1u8..=31,
    ) {
        let due = format!("{year:04}-{month:02}-{day:02}");
        let month = time::Month::try_from(month).unwrap();
        let real = time::Date::from_calendar_date(year, month, day).is_ok();
        let parsed = add_task::parse(&object(json!({ "title": "t", "due": due })));
        match real {
            true => prop_assert_eq!(parsed.unwrap().due, Some(due)),
            false => {
                let named = names(parsed, "due");
                prop_assert!(named, "the field is not named");
            }
        }
    }
}
