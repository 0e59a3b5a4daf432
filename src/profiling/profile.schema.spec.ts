import { profileRequestSchema } from './profile.schema';

describe('start_profile body, coerced as SGLang (pydantic, lax mode) does', () => {
  const parse = (body: unknown) => profileRequestSchema.safeParse(body);

  it('turns numeric strings into integers and null into absent', () => {
    expect(parse({ num_steps: '5', profile_prefix: null, output_dir: null }).data).toEqual({
      num_steps: 5,
    });
    expect(parse({ num_steps: ' 12 ' }).data).toEqual({ num_steps: 12 });
    expect(parse({ activities: null, num_steps: null }).data).toEqual({});
    expect(parse(undefined).data).toEqual({});
  });

  it('turns boolean words and 0/1 into booleans', () => {
    expect(parse({ with_stack: 'true', record_shapes: 'off' }).data).toEqual({
      with_stack: true,
      record_shapes: false,
    });
    expect(parse({ with_stack: 1, record_shapes: '0' }).data).toEqual({
      with_stack: true,
      record_shapes: false,
    });
  });

  it('still refuses what pydantic refuses', () => {
    for (const body of [
      { num_steps: 'five' },
      { num_steps: '2.5' },
      { num_steps: 0 },
      { with_stack: 'maybe' },
      { profile_prefix: '' },
    ]) {
      expect(parse(body).success).toBe(false);
    }
  });
});
