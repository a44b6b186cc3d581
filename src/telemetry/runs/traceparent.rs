//! A span's context as a W3C `traceparent` header value (`00-{trace id}-{span id}-{flags}`),
//! which is how the store keeps a run's trace context: text the store knows nothing of.

use opentelemetry::trace::{SpanContext, SpanId, TraceFlags, TraceId, TraceState};

/// `sc` as a `traceparent` value: version `00`, lower-case hex.
pub(crate) fn format(sc: &SpanContext) -> String {
    format!(
        "00-{:032x}-{:016x}-{:02x}",
        sc.trace_id(),
        sc.span_id(),
        sc.trace_flags().to_u8()
    )
}

/// The span context a `traceparent` value names, as a remote one (another process, or this
/// one before a restart, made it); `None` for anything but a valid version `00` value.
pub(crate) fn parse(text: &str) -> Option<SpanContext> {
    let mut parts = text.split('-');
    let (version, trace, span, flags) =
        (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    let lower_hex = |s: &str, len: usize| {
        s.len() == len
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    let well_formed = parts.next().is_none()
        && version == "00"
        && lower_hex(trace, 32)
        && lower_hex(span, 16)
        && lower_hex(flags, 2);
    if !well_formed {
        return None;
    }
    let trace_id = TraceId::from_hex(trace).ok()?;
    let span_id = SpanId::from_hex(span).ok()?;
    let flags = TraceFlags::new(u8::from_str_radix(flags, 16).ok()?);
    let sc = SpanContext::new(trace_id, span_id, flags, true, TraceState::default());
    sc.is_valid().then_some(sc)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_traceparent_reads_back_as_the_context_it_was_written_from() {
        let sc = SpanContext::new(
            TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").unwrap(),
            SpanId::from_hex("00f067aa0ba902b7").unwrap(),
            TraceFlags::SAMPLED,
            false,
            TraceState::default(),
        );
        let text = format(&sc);
        assert_eq!(
            text,
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        );
        let back = parse(&text).expect("a valid traceparent");
        assert_eq!(back.trace_id(), sc.trace_id());
        assert_eq!(back.span_id(), sc.span_id());
        assert!(back.is_sampled());
        assert!(back.is_remote());
    }

    #[test]
    fn a_malformed_or_empty_traceparent_names_no_context() {
        for text in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00-4bf92f3577b34da6a3ce929d0e0e473-600f067aa0ba902b7-01",
        ] {
            assert!(parse(text).is_none(), "{text}");
        }
    }
}
